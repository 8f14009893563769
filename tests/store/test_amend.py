"""Facts added to a finished run's records: one record per cell still, the others kept
byte for byte, the file replaced whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.store.amend import amend_records
from harness.store.details import MinimalRepro
from harness.store.records import Cell, Record
from harness.store.rundir import RecordWriter, read_records, records_path
from tests.fixtures_compare import measurements


def _records(tmp_path: Path) -> list[Record]:
    records = [
        Record.finished(Cell(f"m{i}", "dynamo", 18), "r", measurements(export_s=float(i)))
        for i in range(3)
    ]
    with RecordWriter(tmp_path) as writer:
        for r in records:
            writer.write(r)
    return records


def test_an_amended_record_replaces_its_line_and_no_other(tmp_path: Path) -> None:
    records = _records(tmp_path)
    before = records_path(tmp_path).read_text().splitlines()
    changed = records[1].with_changes(minimal_repro=MinimalRepro(kind="export", reproduces=True))
    assert amend_records(tmp_path, {changed.cell.key: changed}) == 1
    after = records_path(tmp_path).read_text().splitlines()
    assert (after[0], after[2]) == (before[0], before[2])
    back = read_records(tmp_path)
    assert [r.model for r in back] == ["m0", "m1", "m2"]
    assert back[1].minimal_repro == MinimalRepro(kind="export", reproduces=True)
    assert back[1].export.seconds == 1.0


def test_a_torn_last_line_is_kept_as_it_was(tmp_path: Path) -> None:
    records = _records(tmp_path)
    with records_path(tmp_path).open("a") as f:
        f.write('{"schema": 3, "model": "torn')
    changed = records[0].with_changes(minimal_repro=MinimalRepro(kind="check"))
    amend_records(tmp_path, {changed.cell.key: changed})
    assert records_path(tmp_path).read_text().endswith('{"schema": 3, "model": "torn')


def test_a_records_file_that_is_a_symlink_is_not_rewritten(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_text("")
    run = tmp_path / "run"
    run.mkdir()
    records_path(run).symlink_to(elsewhere)
    with pytest.raises(OSError, match="symbolic link"):
        amend_records(run, {})
    assert elsewhere.read_text() == ""
