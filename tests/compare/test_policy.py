"""The nightly's verdict policy on in-memory runs: deterministic findings against the
previous night and the expected statuses; noisy ones against a long enough history, and
only warnings until there is one."""

from __future__ import annotations

from harness.compare import BLOCKING, WARNING, Finding, NightHistory, nightly_comparison
from harness.compare.policy import NO_BASELINE_ID, usable_history, warn_only
from harness.store.runs import Run
from harness.zoo.expected_file import ExpectedFile
from tests.fixtures_compare import HARDWARE, kinds, one, run, smoke_cells

EXPECTED = ExpectedFile("expected/status.csv", ())
NO_DB = NightHistory(unavailable="no history database yet")


def night(run_id: str, seed: int, *, slow: float = 1.0, broken: bool = False, **kw) -> Run:
    return run(run_id, smoke_cells(seed, slow=slow, broken=broken), **kw)


def history(nights: int) -> NightHistory:
    runs = [night(f"night{n}", 10 + n, started=f"2025-01-0{n}") for n in range(1, nights + 1)]
    return NightHistory(tuple(runs))


def test_the_first_night_is_judged_by_the_expected_statuses_only():
    c = nightly_comparison(night("n1", 4, broken=True), None, EXPECTED, NO_DB, notes=["first"])
    assert c.baseline[0].run_id == NO_BASELINE_ID
    assert kinds(c, BLOCKING) == ["worse_than_expected"]
    assert "expected ok, got export_failed at translate" in c.blocking[0].message
    assert c.notes == (
        "first",
        "statuses checked against expected/status.csv only",
        "latency, export time and memory not compared: no comparable previous night, and no history database yet",
    )


def test_a_slower_night_only_warns_without_enough_history():
    previous, tonight = night("n9", 1), night("n10", 3, slow=1.5)
    c = nightly_comparison(tonight, previous, EXPECTED, history(4))
    regressed = [f for f in c.findings if f.kind == "metric_regressed"]
    assert len(regressed) == 3 and {f.severity for f in regressed} == {WARNING}
    why = "4 earlier nights on this machine in the history, 5 needed"
    assert all(f"only a warning: {why}" in (f.evidence or "") for f in regressed)
    assert c.verdict == "pass"
    assert (
        c.notes[-1]
        == f"latency, export time and memory against the previous night: regressions only warn ({why})"
    )


def test_a_slower_night_blocks_against_a_long_enough_history():
    previous, tonight = night("n9", 1), night("n10", 3, slow=1.5, broken=True)
    c = nightly_comparison(tonight, previous, EXPECTED, history(5))
    regressed = [f for f in c.findings if f.kind == "metric_regressed"]
    assert {f.severity for f in regressed} == {BLOCKING}
    assert all("median of 5 runs" in (f.evidence or "") for f in regressed)  # from the history
    # statuses still from the previous night and the expected statuses
    assert one(c, "status_regressed").severity == WARNING
    assert one(c, "worse_than_expected").severity == BLOCKING
    assert c.notes[-1].startswith("latency, export time and memory against the last 5 nights")


def test_a_previous_night_without_records_counts_as_none():
    empty = Run(night("n9", 1).manifest, (), path="previous/runs/smoke")
    c = nightly_comparison(night("n10", 2), empty, EXPECTED, NO_DB)
    assert c.notes[0] == "the previous nightly's previous/runs/smoke has no records"
    assert c.baseline[0].run_id == NO_BASELINE_ID and c.findings == ()


def test_another_machine_last_night_compares_statuses_only():
    other = night("n9", 1, hardware={**HARDWARE, "cpu": "Other CPU"})
    c = nightly_comparison(night("n10", 3, slow=1.5), other, EXPECTED, NO_DB)
    assert c.findings == ()
    assert c.notes[0].startswith("different machine from the previous nightly: cpu")
    assert "not compared: no comparable previous night" in c.notes[-1]


def test_usable_history_says_why_not():
    assert usable_history(NO_DB, 5) == ((), "no history database yet")
    assert usable_history(history(1), 5) == (
        (),
        "1 earlier night on this machine in the history, 5 needed",
    )
    assert len(usable_history(history(5), 5)[0]) == 5


def test_only_blocking_metric_regressions_are_demoted():
    regressed = Finding("metric_regressed", BLOCKING, "slower", metric="ort_latency", evidence="e")
    assert warn_only(regressed, "why") == Finding(
        "metric_regressed",
        WARNING,
        "slower",
        metric="ort_latency",
        evidence="e; only a warning: why",
    )
    status = Finding("status_regressed", BLOCKING, "ok -> export_failed")
    assert warn_only(status, "why") is status
