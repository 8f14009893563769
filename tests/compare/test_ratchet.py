"""The expected-status ratchet: worse than expected blocks, a different failure blocks,
better is an improvement with the command that updates the file, and `--update-expected`
writes the rows that make a run exactly as expected."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from harness.compare import BLOCKING, IMPROVEMENT, WARNING, Options, compare_runs, updated_expected
from harness.store.status import Stage, Status
from harness.zoo import expected_file
from harness.zoo.expect import Expect
from harness.zoo.expected_file import ExpectedFile
from tests.fixtures_compare import kinds, one, record, run

TODAY = date(2025, 6, 1)
PATH = "expected/status.csv"


def expectations(*rows: Expect) -> ExpectedFile:
    return ExpectedFile(PATH, rows)


def row(line: int, *args, **kwargs) -> Expect:
    """An Expect as read from line `line` of the file."""
    return Expect(*args, **kwargs, source=f"{PATH}:{line}")


def failed(model="m", status="export_failed", stage="capture", error="unsupported", **kw):
    return record(model, status=status, stage=stage, error=RuntimeError(error), **kw)


def compare(base, cand, expected: ExpectedFile):
    return compare_runs(run("A", base), run("B", cand), Options(expected=expected, today=TODAY))


def ratchet(records, expected: ExpectedFile):
    """The ratchet's findings alone: the baseline is the candidate."""
    return compare(records, records, expected)


def test_worse_than_expected_blocks_even_when_the_baseline_failed_too():
    exp = expectations(row(2, "dynamo", "18", "numerics_mismatch", reason="known drift", model="m"))
    f = one(compare([failed()], [failed()], exp), "worse_than_expected")
    assert f.severity == BLOCKING and f.baseline == "numerics_mismatch"
    assert f.evidence == f"{PATH}:2 (known drift)"
    assert (
        f.message
        == "expected numerics_mismatch, got export_failed at capture (RuntimeError: unsupported)"
    )


def test_cell_without_a_row_must_pass():
    c = compare([record()], [failed()], expectations())
    assert kinds(c, BLOCKING) == ["worse_than_expected"]
    assert one(c, "worse_than_expected").evidence == f"{PATH}: no row, expected to pass"
    assert one(c, "status_regressed").severity == WARNING  # the ratchet decides what blocks


def test_better_than_expected_is_reported_with_the_update_command():
    exp = expectations(row(2, "dynamo", status="export_failed", reason="no lowering"))
    c = compare([failed()], [record()], exp)
    f = one(c, "better_than_expected")
    assert f.severity == IMPROVEMENT
    assert "harness compare --update-expected --expected expected/status.csv results/B" in f.message
    assert c.verdict == "pass"


def test_failure_as_expected_does_not_block():
    exp = expectations(row(2, status="export_failed", stage="capture", reason="guard", model="m"))
    c = compare([record()], [failed()], exp)
    assert c.verdict == "pass" and one(c, "status_regressed").severity == WARNING


def test_the_expected_status_at_another_stage_fails_differently():
    """A row for a translation failure does not cover a capture failure: a new way of
    failing never hides behind an old row. The message names the row it did not match."""
    exp = expectations(row(2, "dynamo", status="export_failed", stage="translate", reason="cummax"))
    c = compare([failed()], [failed(stage="capture")], exp)
    f = one(c, "failed_differently")
    assert (f.severity, f.family, f.baseline, f.candidate) == (
        BLOCKING,
        "expected",
        "export_failed",
        Status.EXPORT_FAILED,
    )
    assert f.message.startswith(
        f"fails differently from {PATH}:2 (cummax): expected export_failed at translate, "
        "got export_failed at capture"
    )
    assert c.verdict == "fail"


def test_an_error_the_row_does_not_match_fails_differently():
    exp = expectations(
        row(3, "dynamo", status="export_failed", match="No ONNX function", reason="r")
    )
    assert ratchet([failed(error="No ONNX function for aten.cummax")], exp).findings == ()
    f = one(ratchet([failed(error="Cannot view a tensor")], exp), "failed_differently")
    assert "expected export_failed matching 'No ONNX function'" in f.message
    assert f"{PATH}:3 (r)" in f.message


def test_another_status_of_the_same_rank_is_no_finding():
    """timeout, oom and crashed rank alike: the ratchet orders statuses; a row tells them
    apart by its stage or match, not by the status alone (as before those columns)."""
    exp = expectations(row(2, "dynamo", status="timeout", model="m"))
    assert ratchet([failed(status="crashed", stage=None)], exp).findings == ()


def test_expired_row_is_ignored():
    exp = expectations(row(2, status="export_failed", expires=date(2025, 5, 1), model="m"))
    assert kinds(compare([failed()], [failed()], exp), BLOCKING) == ["worse_than_expected"]


def test_exact_row_wins_over_glob():
    exp = expectations(
        row(2, status="export_failed"),
        row(3, "dynamo", "18", "ok", model="m", device="cpu"),
    )
    assert kinds(compare([failed()], [failed()], exp), BLOCKING) == ["worse_than_expected"]


# -- --update-expected -------------------------------------------------------------------------


def test_update_expected_makes_the_run_exactly_as_expected(tmp_path: Path):
    glob = row(2, "dynamo-legacy", status="export_failed", reason="gone")
    stale = row(3, "dynamo", "18", "timeout", reason="slow", model="elsewhere", device="cpu")
    cand = run(
        "B",
        [
            record("a"),
            failed("b", stage="translate", error="no lowering"),
            failed("c", "timeout", stage=None),
            record("d", "dynamo-legacy"),
        ],
    )
    rows = updated_expected(expectations(glob, stale), cand.records, today=TODAY)
    assert rows[0] == glob
    assert [(r.model, r.exporter, r.status, r.stage, r.reason) for r in rows[1:]] == [
        ("b", "dynamo", Status.EXPORT_FAILED, Stage.TRANSLATE, "RuntimeError: no lowering"),
        ("c", "dynamo", Status.TIMEOUT, None, "RuntimeError: unsupported"),
        ("d", "dynamo-legacy", Status.OK, None, ""),
        ("elsewhere", "dynamo", Status.TIMEOUT, None, "slow"),
    ]  # fmt: skip
    assert all(
        (r.opset, r.device, r.shape, r.variant, r.match) == ("18", "cpu", "*", "*", None)
        for r in rows[1:]
    )
    path = tmp_path / "status.csv"
    expected_file.write(path, rows)
    c = compare_runs(cand, cand, Options(expected=expected_file.read(path), today=TODAY))
    assert c.findings == ()


def test_update_expected_keeps_the_reason_and_a_match_while_they_hold():
    old = row(
        2,
        "dynamo",
        "18",
        "export_failed",
        match="no lowering",
        reason="cummax, upstream #1",
        expires=date(2030, 1, 1),
        model="m",
        device="cpu",
    )
    (kept,) = updated_expected(
        expectations(old), [failed(stage="translate", error="no lowering")], today=TODAY
    )
    assert (kept.reason, kept.expires, kept.stage, kept.match) == (
        "cummax, upstream #1",
        date(2030, 1, 1),
        Stage.TRANSLATE,
        "no lowering",
    )
    (other_error,) = updated_expected(expectations(old), [failed()], today=TODAY)
    assert (other_error.reason, other_error.match) == ("cummax, upstream #1", None)
    (timeout,) = updated_expected(expectations(old), [failed(status="timeout")], today=TODAY)
    assert (timeout.status, timeout.reason, timeout.expires, timeout.match) == (
        Status.TIMEOUT,
        "RuntimeError: unsupported",
        None,
        None,
    )


def test_update_expected_takes_the_worst_status_over_shapes_and_stays_as_expected():
    """static fails at capture, dynamic at translate: one row, status pinned, any stage."""
    records = [
        failed(stage="capture"),
        failed(stage="translate", dynamic=True),
        record("n"),
        failed("n", "numerics_mismatch", "numerics", dynamic=True),
    ]
    rows = updated_expected(None, records, today=TODAY)
    assert [(r.model, r.status, r.stage) for r in rows] == [
        ("m", Status.EXPORT_FAILED, None),
        ("n", Status.NUMERICS_MISMATCH, Stage.NUMERICS),
    ]
    c = compare(records, records, expectations(*rows))
    assert kinds(c, BLOCKING) == [] and kinds(c) == ["better_than_expected"]  # n static: ok


def test_update_expected_writes_no_row_the_hand_written_ones_already_say():
    glob = row(2, "dynamo", status="export_failed", stage="capture", reason="guards")
    assert updated_expected(expectations(glob), [failed()], today=TODAY) == [glob]
    rows = updated_expected(expectations(glob), [failed(stage="translate")], today=TODAY)
    assert rows[0] == glob and (rows[1].model, rows[1].stage) == ("m", Stage.TRANSLATE)


def test_the_repository_expected_file_has_the_current_columns():
    path = Path(__file__).resolve().parents[2] / "expected" / "status.csv"
    expected = expected_file.read(path)
    header = next(ln for ln in path.read_text().splitlines() if not ln.startswith("#"))
    assert header.split(",") == list(expected_file.columns_for(expected.rows))
    assert all(e.status for e in expected.rows)


def test_update_expected_gives_a_float16_cell_a_row_of_its_own():
    """The same model failing at float16 and passing at float32: one float16 row, and the
    float32 cell must still pass (a row without a dtype is about float32 cells)."""

    from harness.store.records import Dtype

    full = record("m")
    broken = failed("m", status="numerics_mismatch", stage="numerics")
    half = broken.with_changes(cell=broken.cell.replace(dtype=Dtype.FLOAT16))
    rows = updated_expected(None, [full, half], today=TODAY)
    assert [(r.dtype, r.status) for r in rows] == [("float16", Status.NUMERICS_MISMATCH)]
    assert kinds(ratchet([full, half], expectations(*rows))) == []
    worse = broken  # the float32 cell now fails the way the float16 row says
    assert BLOCKING in {f.severity for f in ratchet([worse, half], expectations(*rows)).findings}
