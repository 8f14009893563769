"""The worker in-process (no Ray): one cell start to finish, real export and onnxruntime."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cell.shapes import Inputs
from harness.cell.warmup import WARM_UP_MODEL_MIN_OPSET, WarmUpModel, _warm_up, warm_up_exporter
from harness.cell.worker import run_cell
from harness.plan.suites import Protocol
from harness.store.records import Cell, CellTask
from tests.conftest import FIXTURES

QUICK = Protocol(warmup_min_iters=2, warmup_max_s=0.1, min_iters=5, min_time_s=0.02, max_time_s=0.2)


def _task(
    tmp_path: Path, source: Path, model: str, exporter: str = "torchscript", dynamic: bool = False
) -> CellTask:
    return CellTask(
        Cell(model, exporter, 17, dynamic=dynamic), str(source), "r", str(tmp_path), protocol=QUICK
    )


def test_ok_cell_measures_everything(tmp_path: Path) -> None:
    r = run_cell(_task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp", dynamic=True))
    assert r.status == "ok", r.error_message
    assert r.opset_actual == 17 and r.onnx_ops and r.onnx_nodes
    assert r.aten_ops == {"aten.linear": 2, "aten.sigmoid": 1}
    assert [c.name for c in r.numerics or []] == ["output_0", "output_0@second_shape"]
    assert r.ort_latency_ms and r.ort_latency_ms.n >= 5 and r.speedup and r.duration_s


def test_export_memory_budget_fails_the_cell(tmp_path: Path) -> None:
    r = run_cell(_task(tmp_path, FIXTURES / "budget.py", "budget_zero"))
    assert (r.status, r.stage, r.error_type) == ("export_failed", "save", "MemoryBudgetExceeded")
    assert "x the weights" in (r.error_message or "")


def test_unknown_model_is_a_harness_error_record(tmp_path: Path) -> None:
    r = run_cell(_task(tmp_path, FIXTURES / "budget.py", "not_there"))
    assert r.status == "harness_error" and "not found" in (r.error_message or "")


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_warm_up_model_exports_from_its_minimum_opset(exporter: str) -> None:
    inputs = Inputs(WarmUpModel.example_inputs(), {}, ("image", "ids"))
    assert _warm_up(exporter, WARM_UP_MODEL_MIN_OPSET, WarmUpModel().eval(), inputs)


def test_warm_up_below_its_minimum_opset_is_quiet(capfd: pytest.CaptureFixture[str]) -> None:
    warm_up_exporter("torchscript", 11)
    out, err = capfd.readouterr()
    assert "prim::Constant" not in out + err
    # and the model really would not export there, which is why the trivial one is used
    inputs = Inputs(WarmUpModel.example_inputs(), {}, ("image", "ids"))
    assert not _warm_up("torchscript", 11, WarmUpModel().eval(), inputs)
