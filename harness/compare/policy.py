"""The nightly's verdict policy: statuses, opsets, numerics and ops against the previous
night and the expected-status file; latency, export time and memory against the history of
earlier nights on the same machine, once it is long enough to measure their noise, and
only as warnings until then."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from harness.compare.comparison import (
    Comparison,
    Options,
    check_comparable,
    compare_history,
    compare_runs,
)
from harness.compare.findings import BLOCKING, WARNING, Finding
from harness.plan.expected_file import ExpectedFile
from harness.store.paired import PairResult
from harness.store.records import CellKey
from harness.store.runs import Run

# Nights on the same machine before latency, export time and memory may block: the history
# judges a series by its own run-to-run noise from 3 changes on (Thresholds.min_history_changes).
MIN_HISTORY = 5
# Earlier nights the history comparison reads.
HISTORY_LAST = 10
NOISY_KINDS = frozenset({"metric_regressed", "metric_improved", "night_shift", "run_shift"})
NO_BASELINE_ID = "(no previous nightly)"
NOISY = "latency, export time and memory"


@dataclass(frozen=True)
class NightHistory:
    """The earlier nights on the candidate's machine, oldest first, or why there are none."""

    runs: tuple[Run, ...] = ()
    unavailable: str = ""  # e.g. "no history database yet"


def nightly_comparison(
    candidate: Run,
    baseline: Run | None,
    expected: ExpectedFile,
    history: NightHistory,
    *,
    min_history: int = MIN_HISTORY,
    notes: Sequence[str] = (),
    paired: Mapping[CellKey, PairResult] | None = None,
) -> Comparison:
    """One nightly run judged: deterministic findings against the previous night's run
    (`baseline`, None on the first night) and the expected statuses; noisy ones against the
    history when it holds `min_history` nights, else only warnings against the previous night."""
    by_run, comparable = against_previous(candidate, baseline, expected, notes, paired or {})
    runs, why_not = usable_history(history, min_history)
    by_history = compare_history(runs, candidate, Options(paired=paired or {})) if runs else None
    return merged(by_run, by_history, comparable=comparable, why_not=why_not)


def against_previous(
    candidate: Run,
    baseline: Run | None,
    expected: ExpectedFile,
    notes: Sequence[str] = (),
    paired: Mapping[CellKey, PairResult] | None = None,
) -> tuple[Comparison, bool]:
    """The comparison with the previous night's run (or with itself when there is none: no
    findings then but the expected-status ratchet), and whether its noisy metrics count."""
    notes = list(notes)
    if baseline is not None and not baseline.records:
        notes.append(f"the previous nightly's {baseline.path or baseline.run_id} has no records")
        baseline = None
    if baseline is None:
        notes.append(f"statuses checked against {expected.path} only")
        itself = Run({"run_id": NO_BASELINE_ID}, candidate.records, None)
        comparison = compare_runs(itself, candidate, Options(expected=expected))
        return replace(comparison, notes=tuple(notes)), False
    differences = check_comparable(baseline, candidate, allow_different_hardware=True)
    if differences:
        notes.append("different machine from the previous nightly: " + "; ".join(differences))
    options = Options(expected=expected, compare_noisy=not differences, paired=paired or {})
    comparison = compare_runs(baseline, candidate, options)
    return replace(comparison, notes=tuple(notes)), not differences


def usable_history(history: NightHistory, min_history: int) -> tuple[tuple[Run, ...], str]:
    """The history's nights when there are enough to measure noise; else none, and why."""
    if history.unavailable:
        return (), history.unavailable
    n = len(history.runs)
    if n < min_history:
        nights = f"{n} earlier night{'s' if n != 1 else ''}"
        return (), f"{nights} on this machine in the history, {min_history} needed"
    return history.runs, ""


def merged(
    by_run: Comparison, by_history: Comparison | None, *, comparable: bool, why_not: str
) -> Comparison:
    """Deterministic findings from the previous night; latency, export time and memory from
    the history when it is long enough. One previous run on a shared runner cannot tell a
    10% change from noise (an A/A pair of smoke runs on 2 shared cores blocked on ORT
    latency x1.36), so without that history their regressions only warn."""
    if by_history is not None:
        deterministic = [f for f in by_run.findings if f.kind not in NOISY_KINDS]
        findings = deterministic + [f for f in by_history.findings if f.kind in NOISY_KINDS]
        note = f"{NOISY} against the last {len(by_history.baseline)} nights on this machine in the history (noise-scaled thresholds)"
        not_compared = by_history.not_compared
    else:
        findings = [warn_only(f, why_not) for f in by_run.findings]
        if comparable:
            note = f"{NOISY} against the previous night: regressions only warn ({why_not})"
        else:
            note = f"{NOISY} not compared: no comparable previous night, and {why_not}"
        not_compared = by_run.not_compared
    return by_run.with_findings(findings, not_compared=not_compared, notes=(*by_run.notes, note))


def warn_only(f: Finding, why: str) -> Finding:
    """A blocking noisy regression demoted to a warning, saying why."""
    if f.kind != "metric_regressed" or f.severity != BLOCKING:
        return f
    return replace(f, severity=WARNING, evidence=f"{f.evidence}; only a warning: {why}")
