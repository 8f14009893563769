"""The driver's side of minimal repros on hostile run directories: nothing is written
outside the run, and a cell that cannot be minimized here says why in its record."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from harness.repro.runner import make_repros
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Record
from harness.store.rundir import RecordWriter, read_records
from tests.conftest import FIXTURES

BLOCKS = FIXTURES / "repro" / "blocks.py"


def _failed(model: str, variant: str = "base") -> Record:
    cell = Cell(model, "dynamo", 18, variant=variant)
    record = Record.without_run(cell, "r", status="skipped", reason="-")
    return record.with_changes(status="export_failed", stage="translate", error_signature="E: x")


def _write(run_dir: Path, records: list[Record]) -> None:
    with RecordWriter(run_dir) as writer:
        for r in records:
            writer.write(r)


def test_an_artifacts_folder_linking_out_of_the_run_is_refused(tmp_path: Path) -> None:
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    (outside / "repro_min.py").write_text("precious")
    record = _failed("m")
    (run_dir / "artifacts").mkdir(parents=True)
    (run_dir / "artifacts" / record.cell.cell_id).symlink_to(outside)
    _write(run_dir, [record])
    made = make_repros(run_dir, [record], {"m": "zoo.py"}, bound_s=1)
    assert "outside the run directory" in (made[0].summary.reason or "")
    assert (outside / "repro_min.py").read_text() == "precious"
    repro = read_records(run_dir)[0].minimal_repro
    assert repro is not None and repro.reason == made[0].summary.reason


def test_a_model_not_in_the_zoo_and_another_variant_say_why_not(tmp_path: Path) -> None:
    records = [_failed("gone"), _failed("m", variant="old")]
    _write(tmp_path, records)
    made = make_repros(tmp_path, records, {"m": "zoo.py"}, bound_s=1)
    reasons = {m.record.model: m.summary.reason or "" for m in made}
    assert "not in the zoo here" in reasons["gone"]
    assert "variant 'old'" in reasons["m"]
    assert all(m.summary.reproduces is None for m in made)
    assert [r.minimal_repro is not None for r in read_records(tmp_path)] == [True, True]


def test_a_run_stopped_half_way_keeps_the_cells_it_finished(tmp_path: Path) -> None:
    """Stopped (Ctrl-C) after the first cell is recorded: that one is in the records file."""
    records = [_failed("gone"), _failed("also-gone")]
    _write(tmp_path, records)

    def stop(made: object) -> None:
        raise KeyboardInterrupt

    with contextlib.suppress(KeyboardInterrupt):
        make_repros(tmp_path, records, {}, bound_s=1, progress=stop)
    kept = [r.minimal_repro is not None for r in read_records(tmp_path)]
    assert sorted(kept) == [False, True]


@pytest.mark.slow  # a real minimizer and a real crash: about ten seconds
def test_a_minimizer_that_crashes_says_so_and_the_next_cell_is_minimized(tmp_path: Path) -> None:
    """The minimizer runs as a cell does (a child forked from a zygote): a model that
    crashes its process while the minimizer rebuilds it ends that child alone; its record
    names the signal, and the next cell's repro is made in the same zygote's next child."""
    crash = _failed("fault_segv")
    failed = run_cell(CellTask(Cell("repro_block_tracer", "torchscript", 18), str(BLOCKS), "r", str(tmp_path)))  # fmt: skip
    _write(tmp_path, [crash, failed])
    sources = {
        "fault_segv": str(FIXTURES / "faults" / "faults.py"),
        "repro_block_tracer": str(BLOCKS),
    }
    made = {m.record.model: m for m in make_repros(tmp_path, [crash, failed], sources, bound_s=60)}
    reason = made["fault_segv"].summary.reason or ""
    assert reason.startswith("the minimizer's process ended without a result"), reason
    assert "SIGSEGV" in reason
    assert made["repro_block_tracer"].summary.reproduces is True
