from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.store import rundir as store
from harness.store.manifest import Manifest
from harness.store.records import SCHEMA, Cell, OutputCheck, Record
from tests.fixtures_compare import measurements


def _record(model: str) -> Record:
    return Record.without_run(Cell(model, "dynamo", 18), "r1", status="skipped", reason="test")


def test_records_append_and_read_back(tmp_path: Path) -> None:
    with store.RecordWriter(tmp_path) as w:
        w.write(_record("a"))
        w.write(_record("b"))
    assert [r.model for r in store.read_records(tmp_path)] == ["a", "b"]


def test_a_record_with_a_nan_is_written_as_a_harness_error_saying_why(tmp_path: Path) -> None:
    check = OutputCheck("out", float("nan"), None, None, 0.0, 0.0, False)
    bad = Record.finished(
        Cell("m", "torchscript", 18),
        "r1",
        measurements(numerics=[check]),
        status="numerics_mismatch",
    )
    with store.RecordWriter(tmp_path) as w:
        w.write(bad)
        w.write(_record("after"))
    first, after = store.read_records(tmp_path)
    assert (first.model, first.status) == ("m", "harness_error")
    assert "numerics_mismatch record could not be written" in (first.reason or "")
    assert after.model == "after"


def test_torn_last_line_is_reported_and_truncated(tmp_path: Path) -> None:
    with store.RecordWriter(tmp_path) as w:
        w.write(_record("a"))
    with store.records_path(tmp_path).open("a") as f:
        f.write('{"schema": 1, "run_id": "r1", "mod')  # the driver died mid-write
    torn: list[store.TornLine] = []
    assert [r.model for r in store.iter_records(tmp_path, torn=torn)] == ["a"]
    assert torn and torn[0].line_number == 2
    store.truncate_torn_tail(tmp_path)
    with store.RecordWriter(tmp_path) as w:
        w.write(_record("b"))
    assert [r.model for r in store.read_records(tmp_path)] == ["a", "b"]


def test_corrupt_line_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = store.records_path(tmp_path)
    path.write_text(_record("a").to_json() + "\nnot json\n" + _record("b").to_json() + "\n")
    with pytest.raises(store.RunDirError, match=":2 is not a JSON record"):
        store.read_records(tmp_path)


def test_manifest_schema_too_new(tmp_path: Path) -> None:
    store.manifest_path(tmp_path).write_text(json.dumps({"schema": SCHEMA + 1}))
    with pytest.raises(store.RunDirError, match="upgrade"):
        store.read_manifest(tmp_path)


def test_missing_run_dir(tmp_path: Path) -> None:
    with pytest.raises(store.RunDirError, match="not a run directory"):
        store.read_manifest(tmp_path / "nope")


def test_records_and_manifest_are_never_written_through_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    run = tmp_path / "run"
    run.mkdir()
    for name in (store.RECORDS, store.MANIFEST):
        (run / name).symlink_to(victim)
    with pytest.raises(store.RunDirError, match="leads through the symlink"):
        store.RecordWriter(run)
    with pytest.raises(store.RunDirError, match="leads through the symlink"):
        store.write_manifest(run, Manifest(run_id="r"))
    with pytest.raises(store.RunDirError, match="leads through the symlink"):
        store.truncate_torn_tail(run)  # a torn last line would be cut through it
    assert victim.read_text() == "keep me\n"
