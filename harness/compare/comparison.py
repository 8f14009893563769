"""A comparison put together: the deterministic findings against the baseline (one run, or
the latest of the history), the noisy ones against one run or each series' history, and
the expected-status ratchet over them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import TypedDict, Unpack

from harness.compare.against_history import noisy_findings_against_history
from harness.compare.against_run import noisy_findings_against_run
from harness.compare.cold_start import cold_start_findings
from harness.compare.deterministic import deterministic_findings
from harness.compare.exporters import exporter_speed_findings
from harness.compare.findings import BLOCKING, CompareError, Finding, sorted_findings
from harness.compare.metrics import NotCompared
from harness.compare.paired import apply_paired
from harness.compare.ratchet import defer_to_ratchet, ratchet_findings, update_command
from harness.compare.thresholds import Thresholds
from harness.store.paired import PairResult
from harness.store.records import Cell, CellKey
from harness.store.runs import Run, comparability_differences
from harness.zoo.expected_file import ExpectedFile


class Changes(TypedDict, total=False):
    """What `Comparison.with_findings` may change beside the findings."""

    not_compared: dict[str, int]
    notes: tuple[str, ...]


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

    def with_findings(self, findings: Iterable[Finding], **changes: Unpack[Changes]) -> Comparison:
        """The same comparison with other findings (sorted, `unchanged` counted again)."""
        found = sorted_findings(findings)
        touched = {f.cell.key for f in found if f.cell is not None}
        unchanged = len({c.key for c in self.cells} - touched)
        return replace(self, findings=tuple(found), unchanged=unchanged, **changes)


@dataclass(frozen=True)
class Options:
    """How to compare: thresholds, the ratchet file, whether noisy metrics are comparable."""

    thresholds: Thresholds = Thresholds()
    expected: ExpectedFile | None = None
    compare_noisy: bool = True
    today: date = field(default_factory=date.today)
    # Cells whose changed graphs were timed again together (harness compare re-measures
    # them through dispatch): their ORT latency verdicts replace the separate-run ones.
    paired: Mapping[CellKey, PairResult] = field(default_factory=dict)


def compare_runs(base: Run, cand: Run, options: Options | None = None) -> Comparison:
    """Compare a candidate with one baseline run."""
    options = options or Options()
    t, skipped = options.thresholds, NotCompared()
    found = deterministic_findings(base, cand, t)
    found += exporter_speed_findings(base.by_cell(), cand.by_cell())
    notes = []
    if options.compare_noisy:
        b, c = base.by_cell(), cand.by_cell()
        pairs = [(b[k], c[k]) for k in sorted(b.keys() & c.keys())]
        found += noisy_findings_against_run(pairs, t, skipped)
        found += cold_start_findings([base], cand, t)
        found = apply_paired(found, options.paired, cand, t, skipped)
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
    found += exporter_speed_findings(history[-1].by_cell(), cand.by_cell())
    found += noisy_findings_against_history(history, list(cand.by_cell().values()), t, skipped)
    found += cold_start_findings(history, cand, t)
    found = apply_paired(found, options.paired, cand, t, skipped)
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
    cells = {**baseline[-1].by_cell(), **cand.by_cell()}
    comparison = Comparison(
        mode=mode,
        baseline=tuple(baseline),
        candidate=cand,
        findings=(),
        cells=tuple(cells[k].cell for k in sorted(cells)),
        unchanged=len(cells),
        not_compared=dict(sorted(skipped.counts.items())),
        thresholds=options.thresholds,
        notes=tuple(notes),
        expected_path=options.expected.path if options.expected else None,
    )
    return comparison.with_findings(_with_ratchet(found, cand, options))
