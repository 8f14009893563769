"""A reduced-precision cell's repro is made from the model as the cell ran it, at its dtype
(a bfloat16 Conv the checker refuses at opset 18 passes at float32: a repro built at float32
would not reproduce). Real export, real minimizer and script in fresh processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.repro import runner
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Dtype
from harness.store.rundir import RecordWriter, read_records
from harness.store.status import Status
from tests.conftest import FIXTURES

MODELS = FIXTURES / "precision" / "models.py"


@pytest.mark.slow
def test_a_bfloat16_failure_is_reproduced_at_bfloat16(tmp_path: Path) -> None:
    plain = run_cell(CellTask(Cell("small_conv", "dynamo", 18), str(MODELS), "t", str(tmp_path)))
    assert plain.status is Status.OK, plain.error_message
    cell = Cell("small_conv", "dynamo", 18, dtype=Dtype.BFLOAT16)
    failed = run_cell(CellTask(cell, str(MODELS), "t", str(tmp_path)))
    assert failed.status is Status.CHECKER_FAILED, failed.error_message
    with RecordWriter(tmp_path) as writer:
        writer.write(failed)
    runner.make_repros(tmp_path, [failed], {"small_conv": str(MODELS)}, bound_s=60, jobs=1)
    (again,) = read_records(tmp_path)
    repro = again.minimal_repro
    assert repro is not None and repro.kind == "check", again
    assert repro.reproduces is True, repro
    assert "bfloat16" in (tmp_path / again.artifacts["minimal_repro"]).read_text()
