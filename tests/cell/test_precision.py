"""The dtype axis (issue 36): a cell at float16 or bfloat16 is judged against eager at the
dtype (export fidelity) and both against the float32 model (precision loss); a runtime with
no kernel for the dtype is `runtime_missing` naming the op. Real exports and onnxruntime;
each verdict checked against a plain export + ORT session of the same model, in a fresh
process (tests/cell/plain_precision.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.cell.numerics import compare_outputs
from harness.cell.ort import OrtRunner
from harness.cell.precision import BFLOAT16, input_dtype_problems
from harness.cell.reference import Reference
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.runtime import pipeline
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Dtype, Record
from harness.store.status import Stage, Status

MODELS = Path(__file__).resolve().parents[1] / "zoo_fixtures" / "precision" / "models.py"
PLAIN = Path(__file__).resolve().parent / "plain_precision.py"


def _run(tmp_path: Path, model: str, exporter: str, dtype: str, dynamic: bool = False) -> Record:
    cell = Cell(model, exporter, 18, dynamic=dynamic, dtype=Dtype(dtype))
    return run_cell(CellTask(cell, str(MODELS), "t", str(tmp_path)))


def _plain(model: str, exporter: str, dtype: str) -> dict[str, object]:
    """The plain script's figures, in a fresh process."""
    done = subprocess.run(
        [sys.executable, str(PLAIN), str(MODELS), model, exporter, dtype],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_eager_float16_overflow_is_told_apart_from_a_good_export(
    tmp_path: Path, exporter: str
) -> None:
    """Eager float16 overflows (1.3 off float32), ORT does not (8e-4): the export is not
    blamed, and the record says eager is what lost precision."""
    record = _run(tmp_path, "large_rmsnorm", exporter, "float16")
    plain = _plain("large_rmsnorm", exporter, "float16")
    assert record.status is Status.OK, record.error_message
    loss = record.numerics.precision_loss
    assert loss is not None and loss.worse() == "eager"
    (eager,), (ort,) = loss.eager, loss.ort
    assert eager.max_abs == pytest.approx(plain["eager_vs_float32"], rel=1e-6)
    assert ort.max_abs == pytest.approx(plain["ort_vs_float32"], rel=1e-6)
    assert ort.max_abs is not None and eager.max_abs is not None and ort.max_abs < eager.max_abs
    (check,) = record.numerics.checks or []
    assert check.max_abs == pytest.approx(plain["ort_vs_eager"], rel=1e-6)
    assert check.mismatch_fraction == 0.0 and "float32 gate" in (check.note or "")


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_bfloat16_without_a_cpu_kernel_is_the_runtimes_gap_naming_the_op(
    tmp_path: Path, exporter: str
) -> None:
    record = _run(tmp_path, "dense", exporter, "bfloat16")
    plain = _plain("dense", exporter, "bfloat16")
    assert (record.status, record.stage) == (Status.RUNTIME_MISSING, Stage.ORT_SESSION)
    assert "NOT_IMPLEMENTED" in str(plain["ort_error"]) and "Gemm(13)" in str(plain["ort_error"])
    assert "bfloat16 kernel for Gemm(13)" in (record.error_message or "")
    assert record.export.seconds is not None  # the export itself worked
    assert not record.status.judged and not record.status.passing


@pytest.mark.slow
def test_a_bfloat16_graph_orts_cpu_provider_runs_is_judged(tmp_path: Path) -> None:
    """LayerNorm has a bfloat16 kernel: the cell runs through OrtValues (numpy has no
    bfloat16 ORT takes) and its figures are the plain script's."""
    record = _run(tmp_path, "norm", "dynamo", "bfloat16")
    plain = _plain("norm", "dynamo", "bfloat16")
    assert record.status is Status.OK, record.error_message
    (check,) = record.numerics.checks or []
    assert check.max_abs == pytest.approx(plain["ort_vs_eager"], abs=1e-9)
    loss = record.numerics.precision_loss
    assert loss is not None and loss.worse() is None
    assert loss.ort[0].max_abs == pytest.approx(plain["ort_vs_float32"], rel=1e-6)


@pytest.mark.slow
def test_a_dynamic_float16_cell_is_verified_at_its_second_shape(tmp_path: Path) -> None:
    record = _run(tmp_path, "dense", "dynamo", "float16", dynamic=True)
    assert record.status is Status.OK, record.error_message
    names = [c.name for c in record.numerics.checks or []]
    assert len(names) == 2 and names[1] == "output_0@second_shape"
    assert record.cell.cell_id.endswith("--float16") and "float16" in record.cell.label()


def _graph(input_type: int, path: Path) -> Path:
    x = helper.make_tensor_value_info("x", input_type, [2])
    y = helper.make_tensor_value_info("y", input_type, [2])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


def test_a_float32_input_in_a_float16_model_is_named(tmp_path: Path) -> None:
    import torch

    runner = OrtRunner(_graph(TensorProto.FLOAT, tmp_path / "m.onnx"), 1, "cpu")
    inputs = Inputs((torch.ones(2, dtype=torch.float16),), {}, ("x",), ("x",))
    with pytest.raises(StageFailure) as failed:
        pipeline.require_input_dtypes(runner, inputs)
    assert failed.value.stage is Stage.NUMERICS
    assert "input x is tensor(float) where the model takes tensor(float16)" in str(
        failed.value.error
    )
    same = {"x": np.ones(2, dtype=np.float16)}
    assert input_dtype_problems({"x": "tensor(float16)"}, same) == []
    bf16 = {"x": np.ones(2, dtype=BFLOAT16)}
    assert input_dtype_problems({"x": "tensor(bfloat16)"}, bf16) == []


def test_an_export_that_overflows_where_eager_does_not_fails_and_ort_is_blamed() -> None:
    """The other direction: ORT gives inf where eager at the dtype and the float32 model
    are finite. (ORT's CPU provider computes float16 nodes in float32, so no plain model
    here does it: the arrays stand for that graph's outputs.)"""
    truth = np.linspace(1, 2, 200, dtype=np.float32)
    eager = truth.astype(np.float16)
    ort = eager.copy()
    ort[:5] = np.inf  # 2.5% of the elements
    ref = Reference(Inputs((), {}), [eager], [truth])
    (check,) = pipeline.judge([ort], ref, ["y"], None, Dtype.FLOAT16)
    assert not check.ok and check.mismatches == 5 and check.mismatch_fraction == 0.025
    assert pipeline.precision_loss([ort], ref, ["y"], Dtype.FLOAT16).worse() == "ort"


def test_a_reduced_output_passes_with_at_most_one_percent_of_its_elements_off() -> None:
    want = np.ones(1000, dtype=np.float16)
    for off, ok in ((10, True), (11, False)):
        got = want.copy()
        got[:off] = 2
        (check,) = compare_outputs([got], [want], None, ["y"], (1e-3, 1e-5), rounding=0.0)
        assert (check.ok, check.mismatches) == (ok, off)
        assert check.mismatch_fraction == pytest.approx(off / 1000)
    (strict,) = compare_outputs([got], [want], None, ["y"], (1e-3, 1e-5))
    assert not strict.ok  # a float32 cell still fails on one element
