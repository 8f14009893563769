"""The ORT-optimisation axis (issue 36): each level's graph is judged against eager like the
plain cell, with the fused ops that appeared and the optimizers that changed it; where an
optimised graph fails and the graph as exported passes, the search names the optimizer.
Real exports, real onnxruntime and onnxruntime.transformers; the optimizer's verdict is
checked against a plain script in a fresh process (tests/cell/plain_ort_opt.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.cell import ort_opt
from harness.cell.ort import Optimisation
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Dtype, OrtOpt, Record
from harness.store.status import Status

MODELS = Path(__file__).resolve().parents[1] / "zoo_fixtures" / "precision" / "models.py"
PLAIN = Path(__file__).resolve().parent / "plain_ort_opt.py"


def _run(tmp_path: Path, model: str, level: str, dtype: str = "float32") -> Record:
    cell = Cell(model, "dynamo", 18, dtype=Dtype(dtype), ort_opt=OrtOpt(level))
    return run_cell(CellTask(cell, str(MODELS), "t", str(tmp_path)))


def _plain(model: str, optimizer: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, str(PLAIN), str(MODELS), model, optimizer],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return found


@pytest.mark.slow
def test_the_search_names_the_ort_optimizer_that_changes_a_quantized_models_numbers(
    tmp_path: Path,
) -> None:
    """A fake-quantized convolution: ORT_ENABLE_ALL fuses it into QLinearConv and quantizes
    its bias, one quantization step (0.05) off eager; the plain script sees the same with
    and without that optimizer."""
    record = _run(tmp_path, "quant_conv", "default")
    plain = _plain("quant_conv", "WeightBiasQuantization")
    assert plain["none"] == plain["without"] == 0.0 < plain["all"]  # the plain verdicts
    assert record.status is Status.NUMERICS_MISMATCH
    assert record.ort.broken_by == "WeightBiasQuantization"
    (check,) = record.numerics.checks or []
    assert check.max_abs == pytest.approx(plain["all"])
    assert record.minimal_repro is None  # ORT's doing, not the exporter's
    unoptimised = _run(tmp_path, "quant_conv", "none")
    assert unoptimised.status is Status.OK and unoptimised.ort.fused_ops == {}
    assert unoptimised.ort.runtime is not None
    assert unoptimised.ort.runtime.session_options["graph_optimization_level"] == "none"


@pytest.mark.slow
def test_a_fusion_that_only_rounds_differently_at_float16_passes(tmp_path: Path) -> None:
    """The fused SkipLayerNormalization differs from eager float16 on over 1% of the
    elements by torch's tolerance, but stays within float16's rounding of the float32 model,
    as eager does: no failure, and nothing to search."""
    record = _run(tmp_path, "gelu_block", "fusions", "float16")
    assert record.status is Status.OK, record.error_message
    assert record.ort.fused_ops == {"BiasGelu": 1, "SkipLayerNormalization": 1}
    assert record.ort.broken_by is None
    (check,) = record.numerics.checks or []
    assert check.mismatch_fraction == 0.0 and "float32 gate" in (check.note or "")
    loss = record.numerics.precision_loss
    assert loss is not None and loss.worse() is None


@pytest.mark.slow
def test_all_judges_the_written_graph_and_names_what_changed_it(tmp_path: Path) -> None:
    record = _run(tmp_path, "gelu_block", "all")
    assert record.status is Status.OK, record.error_message
    assert record.ort.fused_ops is not None and "SkipLayerNormalization" in record.ort.fused_ops
    assert record.ort.optimizers is not None
    assert {"MatMulAddFusion", "SkipLayerNormFusion"} <= set(record.ort.optimizers)
    assert record.ort.broken_by is None and record.cell.cell_id.endswith("--ort-all")


def _exported(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)).eval()
    path = tmp_path / "m.onnx"
    x = torch.randn(2, 4, 16)  # 3-D: MatMul and Add, which ORT fuses
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=18)
    return path


def test_changed_by_reads_the_transformers_ort_ran_and_disabling_one_removes_it(
    tmp_path: Path,
) -> None:
    path = _exported(tmp_path)
    changed = ort_opt.changed_by(path, Optimisation("all"))
    assert "MatMulAddFusion" in changed
    without = ort_opt.changed_by(path, Optimisation("all", disabled=("MatMulAddFusion",)))
    assert "MatMulAddFusion" not in without
    assert ort_opt.changed_by(path, Optimisation("none")) == []


def test_the_search_tries_each_transformer_that_changed_the_graph(tmp_path: Path) -> None:
    """The judgement is a stand-in here (no ORT transformer breaks numbers on this graph on
    the CPU provider): a graph 'passes' where MatMulAddFusion did not run. The sessions and
    their transformer logs are ORT's own."""
    path = _exported(tmp_path)
    tried: list[tuple[str, ...]] = []

    def passes(p: Path, optimisation: Optimisation) -> bool:
        tried.append(optimisation.disabled)
        return "MatMulAddFusion" not in ort_opt.changed_by(p, optimisation)

    assert ort_opt.culprit(OrtOpt.ALL, path, passes) == "MatMulAddFusion"
    assert tried[0] == () and tried[-1] == ("MatMulAddFusion",)
    assert ort_opt.culprit(OrtOpt.NONE, path, passes) is None
    assert ort_opt.culprit(OrtOpt.ALL, path, lambda p, o: False) is None  # not ORT's doing
