"""Compare a candidate run with a baseline run (or its history) and raise findings.

Two families, two mechanisms (DESIGN.md, "Comparison and alerts"):

- deterministic findings (status, opset, numerics, ATen ops, cells) are exact
  comparisons of two records, plus the expected-status ratchet kept in the repository;
- noisy findings (latency, export time, memory) need a ratio beyond an effect-size floor
  AND evidence that it is not noise: a rank test on the raw samples against one baseline
  run, or a threshold scaled to the series' own run-to-run noise against history, with
  the night-wide shift of all series divided out.

Everything here is pure over records and manifests: no torch, no I/O but `read_run` and
the expected-status file.
"""

from __future__ import annotations

import csv
import fnmatch
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

from harness import stats
from harness.coverage import matrix as coverage
from harness.store.records import Cell, OutputCheck, Record
from harness.store.rundir import read_manifest, read_records
from harness.store.status import Status

STATUSES = tuple(Status)

Value = str | float | int | None
CellKey = tuple[str, str, int, str, bool, str]

# -- severities and kinds ---------------------------------------------------------------------

BLOCKING, WARNING, IMPROVEMENT, INFO = "blocking", "warning", "improvement", "info"
SEVERITIES = (BLOCKING, WARNING, IMPROVEMENT, INFO)

FAMILY_OF_KIND = {
    "status_regressed": "status",
    "status_fixed": "status",
    "status_changed": "status",
    "worse_than_expected": "expected",
    "better_than_expected": "expected",
    "opset_changed": "opset",
    "numerics_flipped": "numerics",
    "numerics_fixed": "numerics",
    "numerics_error_grew": "numerics",
    "unsupported_op_new": "ops",
    "aten_op_lost": "ops",
    "op_coverage_lost": "ops",
    "op_coverage_gained": "ops",
    "cell_appeared": "cells",
    "cell_vanished": "cells",
    "night_shift": "run",
}

# "Worse" for statuses: the further from a working ONNX model a cell stopped, the worse;
# no result at all (timeout, oom, crash) is worse than a clean failure, and a cell the
# harness could not judge (harness_error, not_attempted) is worst. ok, xfail, skipped and
# xpass all did what was expected of them (records.PASSING, plus xpass: better still).
STATUS_RANK = {
    "ok": 0,
    "xpass": 0,
    "xfail": 0,
    "skipped": 0,
    "numerics_mismatch": 1,
    "dynamic_mismatch": 1,
    "ort_run_failed": 2,
    "ort_load_failed": 3,
    "checker_failed": 4,
    "export_failed": 5,
    "timeout": 6,
    "oom": 6,
    "crashed": 6,
    "harness_error": 7,
    "not_attempted": 7,
}
# Cells whose exported model passed every check (xpass: passed although expected to fail).
EXPORTED_OK = frozenset({"ok", "xpass"})


class CompareError(Exception):
    """Runs that cannot be compared, or an expected-status file that cannot be read."""


@dataclass(frozen=True)
class Thresholds:
    """Effect-size floors (relative), the rank test's alpha and the history noise factor."""

    latency_floor: float = 0.10
    export_time_floor: float = 0.20
    memory_floor: float = 0.20
    memory_abs_mb: float = 32.0
    # Latency changes smaller than this are timer and cache noise whatever their ratio
    # (seen here: an 8 us model measured 16% slower between two runs of one build).
    latency_abs_ms: float = 0.02
    alpha: float = 0.01
    # ... and the effect on the rank scale: a candidate sample is slower than a baseline
    # sample at least this often (seen here: a machine hiccup slowed a third of one steady
    # cell's samples, x1.29 in median, p=6e-78, but P(slower) only 0.72; a real slowdown of
    # one model gave 0.99).
    min_prob_slower: float = 0.8
    noise_k: float = 4.0
    numerics_growth: float = 10.0
    # run-to-run changes a series needs before its own noise sets the threshold
    min_history_changes: int = 3
    # series a metric needs before the night-wide shift is estimated (and divided out)
    min_series_for_shift: int = 5


@dataclass(frozen=True)
class Finding:
    """One thing that changed, with the evidence that it did. `cell` is None for run-wide ones."""

    kind: str
    severity: str
    message: str
    cell: Cell | None = None
    metric: str | None = None
    baseline: Value = None
    candidate: Value = None
    ratio: float | None = None
    threshold: float | None = None
    evidence: str | None = None

    @property
    def family(self) -> str:
        return self.metric or FAMILY_OF_KIND[self.kind]

    def to_dict(self) -> dict[str, Any]:
        cell = self.cell
        return {
            "kind": self.kind,
            "family": self.family,
            "severity": self.severity,
            "model": cell.model if cell else None,
            "exporter": cell.exporter if cell else None,
            "opset": cell.opset if cell else None,
            "device": cell.device if cell else None,
            "dynamic": cell.dynamic if cell else None,
            "variant": cell.variant if cell else None,
            "message": self.message,
            "metric": self.metric,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "ratio": self.ratio,
            "threshold": self.threshold,
            "evidence": self.evidence,
        }


# -- runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A run's manifest and records, from a run directory or the history database."""

    manifest: dict[str, Any]
    records: tuple[Record, ...]
    path: str | None = None

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path or "?")

    @property
    def started(self) -> str:
        return str(self.manifest.get("started") or "")

    def by_cell(self) -> dict[CellKey, Record]:
        """Records keyed by cell; a repeated cell (a resumed run) keeps its last record."""
        return {r.cell.key: r for r in self.records}

    def versions(self, variant: str = "base") -> dict[str, Any]:
        return dict((self.manifest.get("versions") or {}).get(variant) or {})


def read_run(path: Path) -> Run:
    """Read a run directory; RunDirError (missing, unreadable, schema too new) propagates."""
    manifest = read_manifest(path)
    return Run(manifest=manifest, records=tuple(read_records(path)), path=str(path))


def comparability(manifest: dict[str, Any]) -> dict[str, Any]:
    """What must match for two runs' numbers to be comparable: hardware, threads, protocol.

    Versions are deliberately absent: they are what a comparison compares. The device is
    part of each cell, so it is compared cell by cell.
    """
    hardware = manifest.get("hardware") or {}
    settings = manifest.get("settings") or {}
    return {
        "cpu": hardware.get("cpu"),
        "cores": hardware.get("cores"),
        "gpus": hardware.get("gpus") or [],
        "threads": settings.get("threads"),
        "protocol": settings.get("protocol") or {},
    }


def comparability_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Human-readable differences between two manifests' comparability, e.g. 'cores 8 vs 4'."""
    ca, cb = comparability(a), comparability(b)
    return [f"{k} {ca[k]!r} vs {cb[k]!r}" for k in ca if ca[k] != cb[k]]


# -- status ranks -----------------------------------------------------------------------------


def status_rank(status: str) -> int:
    return STATUS_RANK.get(status, max(STATUS_RANK.values()))


def _failure_text(r: Record) -> str:
    where = f" at {r.stage}" if r.stage else ""
    error = r.error_signature or r.error_message or r.reason
    return f"{r.status}{where}" + (f" ({error})" if error else "")


def _status_kind_and_severity(base: str, cand: str) -> tuple[str, str] | None:
    rb, rc = status_rank(base), status_rank(cand)
    if base == cand:
        return None
    if rb == 0 and rc > 0:
        return "status_regressed", BLOCKING  # not_attempted too: an unverified cell never passes
    if rb > 0 and rc == 0:
        return "status_fixed", IMPROVEMENT
    if rc > rb:
        return "status_changed", WARNING
    if rc < rb or cand == "xpass":
        return "status_changed", IMPROVEMENT
    if base == "ok" and cand in ("xfail", "skipped"):
        return "status_changed", WARNING  # it passed; now it is expected to fail or skipped
    return "status_changed", INFO


def status_findings(b: Record, c: Record) -> list[Finding]:
    found = _status_kind_and_severity(b.status, c.status)
    if found is None:
        if b.status == "ok" or not c.error_signature or b.error_signature == c.error_signature:
            return []
        message = f"still {c.status}, new error: {c.error_signature}"
        return [_finding("status_changed", INFO, c, message, b.error_signature, c.error_signature)]
    kind, severity = found
    if status_rank(c.status):
        message = f"{b.status} -> {_failure_text(c)}"
    else:
        message = f"{_failure_text(b)} -> {c.status}"
    return [_finding(kind, severity, c, message, b.status, c.status)]


def _finding(
    kind: str,
    severity: str,
    r: Record,
    message: str,
    base: Value = None,
    cand: Value = None,
    **more: Any,
) -> Finding:
    return Finding(
        kind=kind,
        severity=severity,
        message=message,
        cell=r.cell,
        baseline=base,
        candidate=cand,
        **more,
    )


# -- deterministic findings for one cell ------------------------------------------------------


def opset_findings(b: Record, c: Record) -> list[Finding]:
    if b.opset_actual is None or c.opset_actual is None or b.opset_actual == c.opset_actual:
        return []
    message = f"opset_actual {b.opset_actual} -> {c.opset_actual} (requested {c.opset})"
    return [_finding("opset_changed", WARNING, c, message, b.opset_actual, c.opset_actual)]


def numerics_findings(b: Record, c: Record, *, growth: float) -> list[Finding]:
    """Per output (matched by name): ok flipped, or max error grown `growth`-fold within
    tolerance. A flip is a warning that names the output: the status change it comes with
    (numerics_mismatch) is what blocks."""
    if b.numerics is None or c.numerics is None:
        return []
    before = {o.name: o for o in b.numerics}
    pairs = [(before[o.name], o) for o in c.numerics if o.name in before]
    return [f for old, new in pairs if (f := _output_finding(old, new, c, growth))]


def _output_finding(old: OutputCheck, new: OutputCheck, c: Record, growth: float) -> Finding | None:
    tol = f"rtol={new.rtol:g} atol={new.atol:g}"
    values = (old.max_abs, new.max_abs)
    if old.ok and not new.ok:
        message = f"output {new.name} no longer within tolerance: max_abs {old.max_abs} -> {new.max_abs} ({tol})"
        return _finding("numerics_flipped", WARNING, c, message, *values)
    if not old.ok and new.ok:
        return _finding(
            "numerics_fixed",
            IMPROVEMENT,
            c,
            f"output {new.name} within tolerance again ({tol})",
            *values,
        )
    if not (
        old.ok and old.max_abs and new.max_abs is not None and new.max_abs >= growth * old.max_abs
    ):
        return None
    ratio = new.max_abs / old.max_abs
    message = f"output {new.name} max_abs grew {ratio:.0f}x, still within {tol}"
    return _finding(
        "numerics_error_grew", WARNING, c, message, *values, ratio=ratio, threshold=growth
    )


def _unsupported(r: Record) -> list[str] | None:
    """The record's unsupported ATen ops; a cell that exported has none, even when unrecorded."""
    if r.unsupported_ops is None and r.status in EXPORTED_OK:
        return []
    return r.unsupported_ops


def unsupported_op_findings(b: Record, c: Record) -> list[Finding]:
    before, now = _unsupported(b), _unsupported(c)
    if before is None or now is None:
        return []
    new = sorted(set(now) - set(before))
    message = "new unsupported ATen op {} (" + c.status + ")"
    return [_finding("unsupported_op_new", WARNING, c, message.format(op), None, op) for op in new]


def cell_findings(b: Record, c: Record, thresholds: Thresholds) -> list[Finding]:
    """Every deterministic finding between two records of the same cell."""
    return [
        *status_findings(b, c),
        *opset_findings(b, c),
        *numerics_findings(b, c, growth=thresholds.numerics_growth),
        *unsupported_op_findings(b, c),
    ]


def presence_findings(base: dict[CellKey, Record], cand: dict[CellKey, Record]) -> list[Finding]:
    found = []
    for k in sorted(cand.keys() - base.keys()):
        r = cand[k]
        found.append(_finding("cell_appeared", INFO, r, f"new cell ({r.status})", None, r.status))
    for k in sorted(base.keys() - cand.keys()):
        r = base[k]
        message = f"cell missing from the candidate (was {r.status})"
        found.append(_finding("cell_vanished", WARNING, r, message, r.status, None))
    return found


# -- ATen op coverage (run-wide, per exporter) ------------------------------------------------


def _ops_by_exporter(records: Iterable[Record], *, ok: bool) -> dict[str, dict[str, list[str]]]:
    """exporter -> ATen op -> models whose (ok or not ok) cells captured it."""
    table: dict[str, dict[str, list[str]]] = {}
    for r in records:
        if r.aten_ops is None or (r.status in EXPORTED_OK) != ok:
            continue
        ops = list(r.aten_ops) + ([] if ok else list(r.unsupported_ops or ()))
        for op in ops:
            table.setdefault(r.exporter, {}).setdefault(op, []).append(r.model)
    return table


def aten_op_lost_findings(base: Sequence[Record], cand: Sequence[Record]) -> list[Finding]:
    """ATen ops that some ok cell exported in the baseline and that now appear only in
    failing cells of the same exporter (an op that vanished from the suite is no finding)."""
    covered_before = _ops_by_exporter(base, ok=True)
    covered_now = _ops_by_exporter(cand, ok=True)
    found = []
    for exporter, ops in sorted(_ops_by_exporter(cand, ok=False).items()):
        for op, models in sorted(ops.items()):
            was_ok_in = covered_before.get(exporter, {}).get(op)
            if not was_ok_in or op in covered_now.get(exporter, {}):
                continue
            message = (
                f"{op} no longer exports with {exporter}: only in failing cells ({_few(models)})"
            )
            evidence = f"exported in the baseline by {_few(was_ok_in)}"
            found.append(Finding("aten_op_lost", WARNING, message, candidate=op, evidence=evidence))
    return found


def op_coverage_findings(base: Sequence[Record], cand: Sequence[Record]) -> list[Finding]:
    """Per exporter and opset (harness.coverage.matrix): an op that exported and matched in the
    baseline and now fails or gives wrong numbers blocks, naming the zoo models that use
    it; a newly covered op is an improvement. Op cells name their users from the inventory."""
    ops_run = any(r.family == coverage.OPS_FAMILY for r in cand)
    usage = coverage.op_usage() if ops_run else None
    found = []
    for change in coverage.coverage_changes(base, cand, usage=usage):
        was, now = change.before.state, change.after.state
        where = f"{change.column.exporter} at opset {change.column.opset} ({change.column.label})"
        users = f"used by {_few(change.usage)}" if change.usage else "no zoo model recorded"
        if change.lost:
            kind, severity = "op_coverage_lost", BLOCKING
            message = f"{change.op} no longer covered with {where}: {coverage.STATE_TEXT[now]}"
        else:
            kind, severity = "op_coverage_gained", IMPROVEMENT
            message = f"{change.op} now covered with {where}, was {coverage.STATE_TEXT[was]}"
        found.append(
            Finding(
                kind,
                severity,
                f"{message}; {users}",
                cell=change.after.cell,
                baseline=was,
                candidate=now,
                evidence=change.after.signature or change.before.signature,
            )
        )
    return found


def _few(names: Iterable[str], n: int = 5) -> str:
    unique = sorted(set(names))
    return ", ".join(unique[:n]) + (f" and {len(unique) - n} more" if len(unique) > n else "")


# -- expected-status ratchet ------------------------------------------------------------------

EXPECTED_COLUMNS = ("model", "exporter", "opset", "device", "expected_status", "reason", "expires")


@dataclass(frozen=True)
class ExpectedRow:
    """One row of `expected/status.csv`: the status a (glob of) cells is expected to end in."""

    model: str
    exporter: str
    opset: str
    device: str
    expected_status: str
    reason: str = ""
    expires: date | None = None
    line: int = 0

    @property
    def patterns(self) -> tuple[str, str, str, str]:
        return (self.model, self.exporter, self.opset, self.device)

    @property
    def is_glob(self) -> bool:
        return any("*" in p for p in self.patterns)

    def matches(self, cell: Cell) -> bool:
        values = (cell.model, cell.exporter, str(cell.opset), cell.device)
        return all(fnmatch.fnmatchcase(v, p) for v, p in zip(values, self.patterns, strict=True))

    def expired(self, today: date) -> bool:
        return self.expires is not None and self.expires < today

    def to_csv_row(self) -> list[str]:
        expires = self.expires.isoformat() if self.expires else ""
        return [*self.patterns, self.expected_status, self.reason, expires]


@dataclass(frozen=True)
class Expectations:
    """The expected-status file: exact rows win over glob rows, then file order; expired
    rows are ignored; a cell no row matches is expected to pass (rank 0)."""

    path: str
    rows: tuple[ExpectedRow, ...]

    def lookup(self, cell: Cell, today: date) -> ExpectedRow | None:
        live = [r for r in self.rows if r.matches(cell) and not r.expired(today)]
        exact = [r for r in live if not r.is_glob]
        chosen = exact or live
        return chosen[0] if chosen else None


def _parse_row(row: dict[str, str], line: int, path: Path) -> ExpectedRow:
    def cell(name: str) -> str:
        return (row.get(name) or "").strip()

    status = cell("expected_status")
    if status not in STATUSES:
        raise CompareError(f"{path}:{line}: unknown expected_status {status!r}")
    try:
        expires = date.fromisoformat(cell("expires")) if cell("expires") else None
    except ValueError:
        raise CompareError(
            f"{path}:{line}: expires {cell('expires')!r} is not an ISO date"
        ) from None
    model, exporter, opset, device = (cell(c) or "*" for c in EXPECTED_COLUMNS[:4])
    return ExpectedRow(model, exporter, opset, device, status, cell("reason"), expires, line)


def read_expected(path: Path) -> Expectations:
    """Parse the expected-status CSV (lines starting with '#' are comments)."""
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise CompareError(f"cannot read expected-status file {path}: {exc.strerror}") from None
    numbered = [
        (n, ln)
        for n, ln in enumerate(lines, start=1)
        if ln.strip() and not ln.lstrip().startswith("#")
    ]
    if not numbered:
        return Expectations(str(path), ())
    reader = csv.DictReader([ln for _, ln in numbered])
    missing = set(EXPECTED_COLUMNS[:5]) - set(reader.fieldnames or ())
    if missing:
        raise CompareError(
            f"{path}: missing column(s) {', '.join(sorted(missing))}; expected {','.join(EXPECTED_COLUMNS)}"
        )
    rows = tuple(_parse_row(row, numbered[i + 1][0], path) for i, row in enumerate(reader))
    return Expectations(str(path), rows)


def update_command(expected_path: str, candidate: Run) -> str:
    return f"harness compare --update-expected --expected {expected_path} {candidate.path or candidate.run_id}"


def ratchet_findings(
    records: Iterable[Record], expected: Expectations, *, today: date, command: str
) -> list[Finding]:
    """Blocking where a cell ended worse than expected; an improvement (with the command that
    updates the file) where it ended better."""
    return [f for r in records if (f := _ratchet_finding(r, expected, today, command))]


def _ratchet_finding(
    r: Record, expected: Expectations, today: date, command: str
) -> Finding | None:
    row = expected.lookup(r.cell, today)
    want = row.expected_status if row else "ok"
    if row is None:
        source = f"{expected.path}: no row, expected to pass"
    else:
        source = f"{expected.path}:{row.line}" + (f" ({row.reason})" if row.reason else "")
    if status_rank(r.status) > status_rank(want):
        message = f"expected {want}, got {_failure_text(r)}"
        return _finding(
            "worse_than_expected", BLOCKING, r, message, want, r.status, evidence=source
        )
    if status_rank(r.status) < status_rank(want):
        message = f"expected {want}, got {r.status}: update with `{command}`"
        return _finding(
            "better_than_expected", IMPROVEMENT, r, message, want, r.status, evidence=source
        )
    return None


def defer_to_ratchet(findings: list[Finding], expected: Expectations) -> list[Finding]:
    """With an expected-status file the ratchet decides what blocks for status: a baseline
    status regression becomes a warning (the ratchet flags it when it is worse than expected)."""
    note = f"blocking is decided by {expected.path}"
    tied = ("status_regressed",)
    return [
        replace(f, severity=WARNING, evidence=note)
        if f.kind in tied and f.severity == BLOCKING
        else f
        for f in findings
    ]


def updated_expected(
    expected: Expectations | None, records: Sequence[Record], *, today: date
) -> list[ExpectedRow]:
    """The rows that make `records` exactly as expected: hand-written glob rows kept, exact
    rows rewritten for the cells of this run (worst status over dynamic/variant), exact rows
    of cells outside this run kept."""
    old = expected.rows if expected else ()
    globs = [r for r in old if r.is_glob]
    worst: dict[tuple[str, str, str, str], Record] = {}
    for r in records:
        k = (r.model, r.exporter, str(r.opset), r.device)
        if k not in worst or status_rank(r.status) > status_rank(worst[k].status):
            worst[k] = r
    kept = [r for r in old if not r.is_glob and r.patterns not in worst]
    glob_view = Expectations("", tuple(globs))
    fresh = [row for k, r in worst.items() if (row := _exact_row(k, r, old, glob_view, today))]
    return globs + sorted(kept + fresh, key=lambda r: r.patterns)


def _exact_row(
    k: tuple[str, str, str, str],
    r: Record,
    old: Sequence[ExpectedRow],
    globs: Expectations,
    today: date,
) -> ExpectedRow | None:
    by_glob = globs.lookup(r.cell, today)
    glob_rank = status_rank(by_glob.expected_status) if by_glob else 0
    if status_rank(r.status) == glob_rank:
        return None
    previous = next((o for o in old if o.patterns == k and o.expected_status == r.status), None)
    reason = previous.reason if previous else (r.error_signature or r.reason or "")[:160]
    expires = previous.expires if previous else None
    return ExpectedRow(*k, expected_status=r.status, reason=reason, expires=expires)


def write_expected(path: Path, rows: Sequence[ExpectedRow]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        f.write("# Expected status per cell: the CI ratchet of `harness compare` (see --help).\n")
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(EXPECTED_COLUMNS)
        writer.writerows(r.to_csv_row() for r in rows)


# -- noisy metrics ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """A noisy measurement of a record: its raw samples, and how large a change must be."""

    name: str
    label: str
    unit: str
    samples: Callable[[Record], tuple[float, ...] | None]
    floor_field: str  # the Thresholds field with the relative floor
    # blocking when it regresses with statistical backing; a warning otherwise
    blocks: bool
    min_abs_field: str | None = None  # the Thresholds field with an absolute floor

    def floor(self, t: Thresholds) -> float:
        return float(getattr(t, self.floor_field))

    def min_abs(self, t: Thresholds) -> float:
        return float(getattr(t, self.min_abs_field)) if self.min_abs_field else 0.0


def _latency_samples(attr: str) -> Callable[[Record], tuple[float, ...] | None]:
    def samples(r: Record) -> tuple[float, ...] | None:
        lat = getattr(r, attr)
        if lat is None:
            return None
        return lat.samples or (lat.p50,)

    return samples


def _scalar(attr: str) -> Callable[[Record], tuple[float, ...] | None]:
    def samples(r: Record) -> tuple[float, ...] | None:
        value = getattr(r, attr)
        return None if value is None else (float(value),)

    return samples


METRICS = (
    Metric("ort_latency", "ORT latency", "ms", _latency_samples("ort_latency_ms"), "latency_floor", blocks=True, min_abs_field="latency_abs_ms"),
    Metric("eager_latency", "eager latency", "ms", _latency_samples("eager_latency_ms"), "latency_floor", blocks=False, min_abs_field="latency_abs_ms"),
    Metric("export_time", "export time", "s", _scalar("export_s"), "export_time_floor", blocks=True),
    Metric("export_memory", "export peak memory", "MiB", _scalar("export_peak_rss_mb"), "memory_floor", blocks=True, min_abs_field="memory_abs_mb"),
)  # fmt: skip


@dataclass(frozen=True)
class Verdict:
    """A noisy comparison's outcome for one cell and metric, before it becomes a Finding."""

    direction: int  # +1 worse, -1 better, 0 neither
    ratio: float
    threshold: float
    evidence: str
    backed: bool  # statistical evidence beyond the floor (a rank test or a noise estimate)


def _direction(log_ratio: float, log_threshold: float, abs_change: float, min_abs: float) -> int:
    if abs(abs_change) < min_abs:
        return 0
    if log_ratio > log_threshold:
        return 1
    if log_ratio < -log_threshold:
        return -1
    return 0


def _rank_test(
    cand: Sequence[float], base: Sequence[float], direction: int, t: Thresholds
) -> tuple[bool, str]:
    """Whether a Mann-Whitney U test at `alpha` backs a change in `direction` with a large
    enough effect (P(slower) at least `min_prob_slower`, or at most 1 - it), and its text."""
    test = stats.mann_whitney_u(cand, base)
    if direction > 0:
        large, needs = test.prob_greater >= t.min_prob_slower, f">= {t.min_prob_slower:.2f}"
    else:
        large, needs = test.prob_greater <= 1 - t.min_prob_slower, f"<= {1 - t.min_prob_slower:.2f}"
    text = (
        f"Mann-Whitney U p={test.p_value:.2g} (alpha {t.alpha:g}),"
        f" P(slower)={test.prob_greater:.2f} (needs {needs})"
    )
    return test.p_value < t.alpha and large, text


def _floor_text(metric: Metric, t: Thresholds) -> str:
    absolute = f" and {metric.min_abs(t):g} {metric.unit}" if metric.min_abs(t) else ""
    return f"floor {metric.floor(t):.0%}{absolute}"


@dataclass(frozen=True)
class RunDrift:
    """How all cells of a metric moved between the two runs: the median log-ratio (`shift`,
    divided out) and the robust spread of the log-ratios around it (`noise`, the pair's
    run-to-run noise: what a cell's ratio must stand out of). Zero with too few cells."""

    shift: float = 0.0
    noise: float = 0.0
    cells: int = 0


def run_drift(log_ratios: Sequence[float], t: Thresholds) -> RunDrift:
    if len(log_ratios) < t.min_series_for_shift:
        return RunDrift(cells=len(log_ratios))
    return RunDrift(stats.median(log_ratios), stats.robust_sigma(log_ratios), cells=len(log_ratios))


def _run_threshold_text(metric: Metric, t: Thresholds, drift: RunDrift) -> str:
    if not drift.noise:
        return _floor_text(metric, t)
    return (
        f"threshold = max({_floor_text(metric, t)}, {t.noise_k:g} x run-to-run noise"
        f" {drift.noise:.1%} across {drift.cells} cells)"
    )


def judge_against_run(
    metric: Metric,
    base: Sequence[float],
    cand: Sequence[float],
    t: Thresholds,
    drift: RunDrift | None = None,
) -> Verdict:
    """One baseline run: the ratio of medians beyond the threshold, and (with several
    samples on each side) a Mann-Whitney U test at `alpha` agreeing on the direction. The
    run-wide shift is divided out first; the threshold is the floor, or k times the pair's
    run-to-run noise where that is larger (seen here: on 2 shared cores the cells of two
    runs of one build moved +-10% around each other, each with hundreds of samples that a
    rank test alone would call significant)."""
    drift = drift or RunDrift()
    scale = math.exp(drift.shift)
    cand = [x / scale for x in cand]
    mb, mc = stats.median(base), stats.median(cand)
    ratio = mc / mb
    log_thr = max(math.log1p(metric.floor(t)), t.noise_k * drift.noise)
    direction = _direction(math.log(ratio), log_thr, mc - mb, metric.min_abs(t))
    medians = f"median {mb:.4g} -> {mc:.4g} {metric.unit}"
    if drift.shift:
        medians += f" (run-wide shift x{scale:.3f} divided out)"
    threshold = _run_threshold_text(metric, t, drift)
    if len(base) < 2 or len(cand) < 2:
        evidence = f"one sample per run: the {threshold} alone decides; {medians}"
        return Verdict(direction, ratio, math.exp(log_thr), evidence, backed=False)
    agrees, test = _rank_test(cand, base, direction, t)
    evidence = f"{medians} ({len(base)} vs {len(cand)} samples), {threshold}; {test}"
    return Verdict(direction if agrees else 0, ratio, math.exp(log_thr), evidence, backed=True)


def _to_finding(
    metric: Metric, v: Verdict, r: Record, base: float, cand: float, *, single_run: bool = False
) -> Finding | None:
    if v.direction == 0:
        return None
    worse = v.direction > 0
    kind = "metric_regressed" if worse else "metric_improved"
    # A single sample per run carries no noise estimate: reported, never an alarm, until
    # history gives the series its own threshold (seen here: export time x1.55 between
    # two runs of the same build on a loaded machine). Likewise a non-blocking metric
    # (eager latency: the reference, not the exporters' product) against one run.
    alarm = v.backed and (metric.blocks or not single_run)
    severity = (
        (BLOCKING if metric.blocks and v.backed else WARNING if alarm else INFO)
        if worse
        else IMPROVEMENT
    )
    message = f"{metric.label} {'worse' if worse else 'better'}: x{v.ratio:.2f} (threshold x{v.threshold:.2f})"
    return Finding(
        kind=kind,
        severity=severity,
        message=message,
        cell=r.cell,
        metric=metric.name,
        baseline=base,
        candidate=cand,
        ratio=v.ratio,
        threshold=v.threshold,
        evidence=v.evidence,
    )


@dataclass
class NotCompared:
    """Counts of cell metrics that could not be compared, by reason (never a finding)."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, reason: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1


def paired_samples(
    metric: Metric, b: Record, c: Record, skipped: NotCompared
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    sb, sc = metric.samples(b), metric.samples(c)
    if sb is None or sc is None:
        if sb is not None or sc is not None:
            skipped.add(f"{metric.name}: missing on one side")
        return None
    if b.status != c.status:
        skipped.add(f"{metric.name}: status differs")
        return None
    if stats.median(sb) <= 0 or stats.median(sc) <= 0:
        skipped.add(f"{metric.name}: not positive")
        return None
    return sb, sc


def noisy_findings_against_run(
    pairs: Sequence[tuple[Record, Record]], t: Thresholds, skipped: NotCompared
) -> list[Finding]:
    found = []
    for metric in METRICS:
        paired = [(c, p) for b, c in pairs if (p := paired_samples(metric, b, c, skipped))]
        drift = run_drift(
            [math.log(stats.median(sc) / stats.median(sb)) for _, (sb, sc) in paired], t
        )
        for c, (sb, sc) in paired:
            if finding := cell_finding_against_run(metric, c, sb, sc, t, drift):
                found.append(finding)
    return found


def cell_finding_against_run(
    metric: Metric,
    cand: Record,
    base_samples: Sequence[float],
    cand_samples: Sequence[float],
    t: Thresholds,
    drift: RunDrift,
) -> Finding | None:
    """One cell's metric judged against one baseline run, given how all cells moved."""
    verdict = judge_against_run(metric, base_samples, cand_samples, t, drift)
    return _to_finding(
        metric,
        verdict,
        cand,
        stats.median(base_samples),
        stats.median(cand_samples),
        single_run=True,
    )


@dataclass(frozen=True)
class Series:
    """One cell's metric over the history runs (medians, oldest first) and in the candidate."""

    record: Record
    medians: tuple[float, ...]
    latest_samples: tuple[float, ...]
    candidate: tuple[float, ...]

    @property
    def reference(self) -> float:
        return stats.median(self.medians)

    @property
    def candidate_median(self) -> float:
        return stats.median(self.candidate)

    @property
    def log_ratio(self) -> float:
        return math.log(self.candidate_median / self.reference)


def build_series(
    metric: Metric, history: Sequence[dict[CellKey, Record]], c: Record, skipped: NotCompared
) -> Series | None:
    past = [h[c.cell.key] for h in history if c.cell.key in h]
    usable = [
        (s, r)
        for r in past
        if r.status == c.status and (s := metric.samples(r)) and stats.median(s) > 0
    ]
    sc = metric.samples(c)
    if sc is None or not usable:
        if sc is not None and past:
            skipped.add(f"{metric.name}: no history with the same status")
        return None
    if stats.median(sc) <= 0:
        skipped.add(f"{metric.name}: not positive")
        return None
    return Series(c, tuple(stats.median(s) for s, _ in usable), usable[-1][0], sc)


def night_shift(series: Sequence[Series], t: Thresholds) -> float:
    """The median log-ratio of all series, candidate vs reference: tonight's machine-wide
    drift, divided out before one series is judged. 0 with too few series to tell."""
    if len(series) < t.min_series_for_shift:
        return 0.0
    return stats.median([s.log_ratio for s in series])


def _history_evidence(metric: Metric, s: Series, shift: float) -> str:
    return (
        f"reference {s.reference:.4g} {metric.unit} (median of {len(s.medians)} runs) -> "
        f"{s.candidate_median:.4g} {metric.unit}; raw x{math.exp(s.log_ratio):.3f}, "
        f"night-wide shift x{math.exp(shift):.3f} divided out"
    )


def judge_against_history(metric: Metric, s: Series, shift: float, t: Thresholds) -> Verdict:
    """max(floor, k * robust sigma of past run-to-run log-ratios) on the shift-adjusted ratio;
    with too short a history the floor, plus the rank test against the latest run."""
    floor = metric.floor(t)
    noise_thr = stats.noise_log_threshold(
        s.medians, floor=floor, k=t.noise_k, min_changes=t.min_history_changes
    )
    log_thr = noise_thr if noise_thr is not None else math.log1p(floor)
    adjusted = s.log_ratio - shift
    direction = _direction(adjusted, log_thr, s.candidate_median - s.reference, metric.min_abs(t))
    ratio, threshold, evidence = (
        math.exp(adjusted),
        math.exp(log_thr),
        _history_evidence(metric, s, shift),
    )
    if noise_thr is not None:
        sigma = stats.robust_sigma(stats.log_ratios(s.medians))
        evidence += f"; threshold = max(floor {floor:.0%}, {t.noise_k:g} x noise {sigma:.1%})"
        return Verdict(direction, ratio, threshold, evidence, backed=True)
    evidence += f"; history too short for a noise estimate ({len(s.medians)} runs): {_floor_text(metric, t)}"
    if direction and len(s.latest_samples) >= 2 and len(s.candidate) >= 2:
        agrees, test = _rank_test(s.candidate, s.latest_samples, direction, t)
        evidence += f"; against the latest run: {test}"
        return Verdict(direction if agrees else 0, ratio, threshold, evidence, backed=True)
    return Verdict(direction, ratio, threshold, evidence, backed=False)


def _night_shift_finding(metric: Metric, shift: float, n: int, t: Thresholds) -> Finding:
    message = (
        f"{metric.label} moved x{math.exp(shift):.2f} across all {n} series tonight (machine "
        "drift or a change that hits everything); divided out of each series"
    )
    return Finding(
        "night_shift",
        WARNING,
        message,
        metric=metric.name,
        ratio=math.exp(shift),
        threshold=1 + metric.floor(t),
    )


def noisy_findings_against_history(
    history: Sequence[Run], cand: Sequence[Record], t: Thresholds, skipped: NotCompared
) -> list[Finding]:
    tables = [h.by_cell() for h in history]
    found: list[Finding] = []
    for metric in METRICS:
        series = [s for c in cand if (s := build_series(metric, tables, c, skipped))]
        shift = night_shift(series, t)
        if abs(shift) > math.log1p(metric.floor(t)):
            found.append(_night_shift_finding(metric, shift, len(series), t))
        for s in series:
            v = judge_against_history(metric, s, shift, t)
            finding = _to_finding(metric, v, s.record, s.reference, s.candidate_median)
            if finding:
                found.append(finding)
    return found


# -- the comparison ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """All findings of one comparison, and what the outputs need to describe it."""

    mode: str  # "run" or "history"
    baseline: tuple[Run, ...]  # one run, or the history runs oldest first
    candidate: Run
    findings: tuple[Finding, ...]
    cells: tuple[Cell, ...]
    unchanged: int
    not_compared: dict[str, int]
    thresholds: Thresholds
    notes: tuple[str, ...] = ()
    expected_path: str | None = None

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == BLOCKING]

    @property
    def verdict(self) -> str:
        return "fail" if self.blocking else "pass"

    def by_severity(self, severity: str) -> list[Finding]:
        return [f for f in self.findings if f.severity == severity]


@dataclass(frozen=True)
class Options:
    """How to compare: thresholds, the ratchet file, whether noisy metrics are comparable."""

    thresholds: Thresholds = Thresholds()
    expected: Expectations | None = None
    compare_noisy: bool = True
    today: date = field(default_factory=date.today)


def deterministic_findings(base: Run, cand: Run, t: Thresholds) -> list[Finding]:
    b, c = base.by_cell(), cand.by_cell()
    found = presence_findings(b, c)
    for key in sorted(b.keys() & c.keys()):
        found.extend(cell_findings(b[key], c[key], t))
    found += aten_op_lost_findings(list(b.values()), list(c.values()))
    return found + op_coverage_findings(list(b.values()), list(c.values()))


def _with_ratchet(found: list[Finding], cand: Run, options: Options) -> list[Finding]:
    if options.expected is None:
        return found
    command = update_command(options.expected.path, cand)
    records = cand.by_cell().values()
    ratchet = ratchet_findings(records, options.expected, today=options.today, command=command)
    return defer_to_ratchet(found, options.expected) + ratchet


def _assemble(
    mode: str,
    baseline: Sequence[Run],
    cand: Run,
    found: list[Finding],
    skipped: NotCompared,
    options: Options,
    notes: list[str],
) -> Comparison:
    found = _with_ratchet(found, cand, options)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    found.sort(key=lambda f: (order[f.severity], f.family, f.cell.key if f.cell else ()))
    cells = {**baseline[-1].by_cell(), **cand.by_cell()}
    touched = {f.cell.key for f in found if f.cell is not None}
    return Comparison(
        mode=mode,
        baseline=tuple(baseline),
        candidate=cand,
        findings=tuple(found),
        cells=tuple(cells[k].cell for k in sorted(cells)),
        unchanged=len(cells.keys() - touched),
        not_compared=dict(sorted(skipped.counts.items())),
        thresholds=options.thresholds,
        notes=tuple(notes),
        expected_path=options.expected.path if options.expected else None,
    )


def compare_runs(base: Run, cand: Run, options: Options | None = None) -> Comparison:
    """Compare a candidate with one baseline run."""
    options = options or Options()
    t, skipped = options.thresholds, NotCompared()
    found = deterministic_findings(base, cand, t)
    notes = []
    if options.compare_noisy:
        b, c = base.by_cell(), cand.by_cell()
        found += noisy_findings_against_run(
            [(b[k], c[k]) for k in sorted(b.keys() & c.keys())], t, skipped
        )
    else:
        notes.append(
            "runs differ in hardware or settings: latency, export time and memory not compared"
        )
    return _assemble("run", [base], cand, found, skipped, options, notes)


def compare_history(
    history: Sequence[Run], cand: Run, options: Options | None = None
) -> Comparison:
    """Compare a candidate with the last comparable runs: deterministic findings against the
    latest of them, noisy ones against each series' own history."""
    if not history:
        raise CompareError("no comparable runs in the history to compare with")
    options = options or Options()
    t, skipped = options.thresholds, NotCompared()
    found = deterministic_findings(history[-1], cand, t)
    found += noisy_findings_against_history(history, list(cand.by_cell().values()), t, skipped)
    notes = [
        f"history: {len(history)} comparable runs, {history[0].run_id} .. {history[-1].run_id}; statuses compared with the latest"
    ]
    return _assemble("history", history, cand, found, skipped, options, notes)


def check_comparable(base: Run, cand: Run, *, allow_different_hardware: bool) -> list[str]:
    """Raise CompareError when hardware or settings differ, unless allowed; then return the
    differences (the caller compares statuses only)."""
    differences = comparability_differences(base.manifest, cand.manifest)
    if differences and not allow_different_hardware:
        raise CompareError(
            f"runs not comparable: {'; '.join(differences)} (pass --allow-different-hardware to compare statuses only)"
        )
    return differences
