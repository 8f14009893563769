"""Each cell is what a direct torch.onnx.export call does (issue 13): export-only branches
run, a trailing dict is keyword arguments, and a numerics mismatch says where it starts.
Real exports and onnxruntime, in this process (the crash and hang cases need a worker
process: tests/e2e/test_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Stage, Status

FIDELITY = Path(__file__).resolve().parent.parent / "zoo_fixtures" / "fidelity"


def _run(tmp_path: Path, file: str, model: str, exporter: str) -> Record:
    task = CellTask(
        cell=Cell(model, exporter, 18),
        source=str(FIDELITY / file),
        run_id="t",
        run_dir=str(tmp_path),
    )
    return run_cell(task)


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_an_export_only_branch_is_exported_as_a_direct_call_exports_it(
    tmp_path: Path, exporter: str
) -> None:
    """Under export the model doubles its output: eager and ONNX disagree, as they do for
    a user who exports it (the old dynamo cell captured outside export and passed)."""
    record = _run(tmp_path, "export_only.py", "export_only_value", exporter)
    assert (record.status, record.stage) == (Status.NUMERICS_MISMATCH, Stage.NUMERICS)
    assert record.export.onnx_ops and "Mul" in record.export.onnx_ops


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_a_trailing_dict_is_keyword_arguments_for_both_exporters(
    tmp_path: Path, exporter: str
) -> None:
    record = _run(tmp_path, "trailing_dict.py", "trailing_dict", exporter)
    assert record.status is Status.EXPORT_FAILED
    assert "extras" in (record.error_message or "") or "scale" in (record.error_message or "")


@pytest.mark.slow
def test_the_first_divergent_node_of_a_wrong_constant_is_named(tmp_path: Path) -> None:
    record = _run(tmp_path, "wrong_constant.py", "wrong_constant", "dynamo")
    assert record.status is Status.NUMERICS_MISMATCH
    found = record.numerics.first_divergence
    assert found is not None
    assert (found.node, found.op_type, found.aten_op) == (
        "node_shift",
        "Add",
        "harness_test.shift.default",
    )
    source = (FIDELITY / "wrong_constant.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if "harness_test.shift(y)" in text)
    assert found.source == f"{FIDELITY / 'wrong_constant.py'}:{line} in forward"
    assert found.max_abs == pytest.approx(1.0)
    assert found.compared == 3  # linear, relu, then the shift


def test_torchscript_cells_say_why_no_node_is_named(tmp_path: Path) -> None:
    record = _run(tmp_path, "export_only.py", "export_only_value", "torchscript")
    found = record.numerics.first_divergence
    assert found is not None and "no mapping" in (found.reason or "")


@pytest.mark.slow
def test_phases_are_observed_around_the_real_call(tmp_path: Path) -> None:
    record = _run(tmp_path, "wrong_constant.py", "wrong_constant", "dynamo")
    phases = record.export.phases or {}
    assert set(phases) == {"capture", "translate", "optimize", "save"}
    assert all(v is not None and v >= 0 for v in phases.values())
    assert record.export.seconds is not None and record.export.seconds >= sum(phases.values())  # type: ignore[arg-type]


def test_a_divergence_in_the_last_node_before_a_renamed_output_is_still_found(
    tmp_path: Path,
) -> None:
    """The last node's output is the graph output, renamed output_0 (no FX counterpart):
    the walk skips it and still names the node before (seen on aten.gru.input)."""
    record = _run(tmp_path, "wrong_constant.py", "wrong_constant_last", "dynamo")
    assert record.status is Status.NUMERICS_MISMATCH
    found = record.numerics.first_divergence
    assert found is not None and found.node == "node_shift", found
