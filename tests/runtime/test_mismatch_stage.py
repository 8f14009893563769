"""Which stage changed the numbers of a numerics mismatch, and which optimizer step (issue
27): real exports, the ONNX reference evaluator and ONNX Runtime on deliberately broken
models (tests/zoo_fixtures/repro*)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.exporters.dynamo_stages import first_changed
from harness.runtime.worker import run_cell
from harness.store.details import Open, StageCheck
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Status

FIXTURES = Path(__file__).resolve().parent.parent / "zoo_fixtures"
BROKEN = FIXTURES / "repro" / "broken.py"
BAD_RULE = FIXTURES / "repro_optimizer" / "bad_rule.py"


def _run(tmp_path: Path, source: Path, model: str, exporter: str = "dynamo") -> Record:
    task = CellTask(Cell(model, exporter, 18), str(source), "t", str(tmp_path))
    return run_cell(task)


def _run_elsewhere(tmp_path: Path, source: Path, model: str) -> Record:
    """The cell in a fresh interpreter: the fixture adds a rewrite rule to onnxscript's
    defaults, which must not stay in this test process."""
    code = (
        "import sys; from harness.runtime.worker import run_cell;"
        " from harness.store.records import Cell, CellTask;"
        f" r = run_cell(CellTask(Cell({model!r}, 'dynamo', 18), {str(source)!r}, 't', {str(tmp_path)!r}));"
        " sys.stdout.write('RECORD ' + r.to_json())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RECORD "))
    return Record.from_json(line[len("RECORD ") :])


@pytest.mark.slow
def test_an_export_only_constant_is_attributed_to_capture(tmp_path: Path) -> None:
    """The case of the issue: the program itself differs from eager and every ONNX node
    follows it. The record no longer says the difference is in the final outputs."""
    record = _run(tmp_path, BROKEN, "repro_export_only")
    assert record.status is Status.NUMERICS_MISMATCH
    stage = _dict(record.numerics.mismatch_stage)
    assert stage["stage"] == "capture"
    by_stage = {c["stage"]: c for c in stage["checks"]}
    assert not by_stage["capture"]["ok"] and by_stage["capture"]["max_abs"] > 0.1
    assert all(by_stage[s]["ok"] for s in ("translation", "optimization", "runtime"))
    reason = _dict(record.numerics.first_divergence)["reason"]
    assert "itself differs from eager (capture)" in reason
    assert "the difference is in the final outputs" not in reason
    assert "optimizer_step" not in stage


@pytest.mark.slow
def test_a_wrong_constant_in_a_translation_is_attributed_to_translation(tmp_path: Path) -> None:
    record = _run(tmp_path, BROKEN, "repro_wrong_constant")
    stage = _dict(record.numerics.mismatch_stage)
    assert stage["stage"] == "translation"
    by_stage = {c["stage"]: c for c in stage["checks"]}
    assert by_stage["capture"]["ok"]
    assert not by_stage["translation"]["ok"] and by_stage["translation"]["max_abs"] > 0.5
    assert all(by_stage[s]["ok"] for s in ("optimization", "runtime"))
    assert _dict(record.numerics.first_divergence)["fx_node"] == "shift"


@pytest.mark.slow
def test_a_wrong_rewrite_rule_is_named_by_bisecting_the_optimizer(tmp_path: Path) -> None:
    record = _run_elsewhere(tmp_path, BAD_RULE, "repro_optimizer_rule")
    assert record.status is Status.NUMERICS_MISMATCH
    stage = _dict(record.numerics.mismatch_stage)
    assert stage["stage"] == "optimization"
    step = stage["optimizer_step"]
    assert (step["pass"], step["rule"]) == ("RewritePass (iteration 1)", "FoldSinOfCos")
    assert step["replica_exact"]  # the steps laid out one by one are the exporter's optimizer
    assert step["nodes"]  # the exporter's graph has the nodes the rule made, by their metadata
    assert step["tests"] <= 2 * 6  # bisection, not one export per step and rule


def test_torchscript_cells_say_why_no_stage_is_named(tmp_path: Path) -> None:
    record = _run(tmp_path, BROKEN, "repro_export_only", "torchscript")
    assert record.status is Status.NUMERICS_MISMATCH
    assert _dict(record.numerics.mismatch_stage).get("stage") is None
    assert "torchscript" in _dict(record.numerics.mismatch_stage)["reason"]


def _check(stage: str, ok: bool, max_abs: float | None) -> StageCheck:
    return StageCheck(stage=stage, ok=ok, max_abs=max_abs)


def test_the_first_stage_beyond_tolerance_is_named() -> None:
    checks = [
        _check("capture", True, 0.0),
        _check("translation", True, 1e-6),
        _check("optimization", True, 0.0),
        _check("runtime", False, 0.3),
    ]
    assert first_changed(checks) == "runtime"
    checks[1] = _check("translation", False, 0.01)
    assert first_changed(checks) == "translation"


def test_where_no_stage_alone_is_beyond_tolerance_the_largest_change_is_named() -> None:
    """An error built up over stages: each within tolerance, the sum not."""
    checks = [
        _check("capture", True, 1e-6),
        _check("translation", True, 8e-5),
        _check("runtime", True, 2e-5),
    ]
    assert first_changed(checks) == "translation"
    assert first_changed([_check("capture", True, None)]) is None


def test_a_record_without_an_optimizer_step_reads_back(tmp_path: Path) -> None:
    record = _run(tmp_path, BROKEN, "repro_wrong_constant")
    assert (
        _dict(Record.from_json(record.to_json()).numerics.mismatch_stage)
        == json.loads(record.to_json())["mismatch_stage"]
    )


def _dict(part: Open | None) -> dict[str, Any]:
    return {} if part is None else part.to_dict()
