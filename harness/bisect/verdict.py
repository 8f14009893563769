"""What a bisection looks for, and what one version says about one cell. Pure over
findings and records (harness.compare makes the findings).

What counts as bad is any finding `harness compare` makes about a cell: a status change,
an opset change, a numerics flip, ops lost, a latency regression (judged on the two graphs
timed together where the graph changed), export time or memory; or `graph`, the cell's
graph fingerprint differing from the good version's. By default (`auto`) it is what the
comparison of the good and the bad version reports for the cells: its blocking findings,
or, where none block, its warnings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from harness.bisect.search import Judgement, Verdict
from harness.compare.findings import BLOCKING, WARNING, Finding
from harness.compare.metrics import METRICS
from harness.store.records import CellKey, Record

AUTO = "auto"
GRAPH = "graph"
# The families of `harness compare`'s cell findings (harness.compare.findings, metrics)
FAMILIES = ("status", "opset", "numerics", "ops", *(m.name for m in METRICS))
ALIASES = {"latency": "ort_latency"}
# A paired re-measurement that ended without a verdict says neither good nor bad.
UNDECIDED_KINDS = frozenset({"paired_unknown"})


class CriterionError(ValueError):
    """A `--finding` that names no family: a usage error."""


@dataclass(frozen=True)
class Criterion:
    """Which findings make a version bad: `families` (None: auto)."""

    families: frozenset[str] | None = None

    @classmethod
    def parse(cls, names: Sequence[str]) -> Criterion:
        wanted = {ALIASES.get(n, n) for n in names if n}
        if not wanted or wanted == {AUTO}:
            return cls()
        unknown = sorted(wanted - {*FAMILIES, GRAPH})
        if unknown or AUTO in wanted:
            known = ", ".join((AUTO, *FAMILIES, GRAPH, *ALIASES))
            raise CriterionError(
                f"--finding {','.join(names)}: unknown ({', '.join(unknown) or 'auto with others'}); one of {known}"
            )
        return cls(frozenset(wanted))

    @property
    def graph(self) -> bool:
        return self.families is not None and GRAPH in self.families

    def wants(self, family: str) -> bool:
        """Whether findings of `family` may make a version bad (auto: any)."""
        return self.families is None or family in self.families

    def describe(self) -> str:
        return "auto" if self.families is None else ",".join(sorted(self.families))


@dataclass(frozen=True)
class Target:
    """The finding one cell is bisected on: its family, kind and message at the bad version."""

    family: str
    kind: str
    message: str
    severity: str = BLOCKING


def regressed(f: Finding) -> bool:
    """A finding that says the cell got worse (a backed alarm, or any metric regression
    when asked for it by name: one sample per run is never an alarm by itself)."""
    if f.kind in UNDECIDED_KINDS or f.cell is None:
        return False
    return f.severity in (BLOCKING, WARNING) or f.kind == "metric_regressed"


def targets(
    findings: Iterable[Finding],
    good: Mapping[CellKey, Record],
    bad: Mapping[CellKey, Record],
    criterion: Criterion,
) -> dict[CellKey, Target]:
    """Each cell's target: the first (most severe) finding of the good-bad comparison that
    the criterion selects; the graph criterion compares fingerprints instead."""
    chosen = [f for f in findings if regressed(f)]
    if criterion.families is None:
        blocking = [f for f in chosen if f.severity == BLOCKING]
        chosen = blocking or [f for f in chosen if f.severity == WARNING]
    else:
        chosen = [f for f in chosen if f.family in criterion.families]
    found: dict[CellKey, Target] = {}
    for f in chosen:
        assert f.cell is not None
        found.setdefault(f.cell.key, Target(f.family, f.kind, f.message, f.severity))
    if criterion.graph:
        for key in sorted(good.keys() & bad.keys()):
            if key not in found and (t := graph_target(good[key], bad[key])):
                found[key] = t
    return dict(sorted(found.items()))


def graph_target(good: Record, bad: Record) -> Target | None:
    a, b = good.export.graph_fingerprint, bad.export.graph_fingerprint
    if a is None or b is None or a == b:
        return None
    return Target(GRAPH, "graph_changed", f"graph changed ({_ops_text(good, bad)})", WARNING)


def judge(
    target: Target,
    version: str,
    findings: Sequence[Finding],
    good: Record,
    step: Record | None,
) -> Verdict:
    """Whether `version` shows the target on the cell: `findings` are the comparison of the
    good version with this one, for this cell; `step` is this version's record."""
    if step is None:
        return Verdict(version, Judgement.SKIP, "no record of the cell")
    if target.family == GRAPH:
        return _judge_graph(version, good, step)
    same = [f for f in findings if f.family == target.family]
    if hit := next((f for f in same if regressed(f)), None):
        return Verdict(version, Judgement.BAD, hit.message)
    if undecided := next((f for f in same if f.kind in UNDECIDED_KINDS), None):
        return Verdict(version, Judgement.SKIP, undecided.message)
    if target.family != "status" and good.passed and not step.passed:
        return Verdict(version, Judgement.SKIP, f"{step.status}: {target.family} not measured")
    return Verdict(version, Judgement.GOOD, f"no {target.family} finding")


def _judge_graph(version: str, good: Record, step: Record) -> Verdict:
    if step.export.graph_fingerprint is None:
        return Verdict(version, Judgement.SKIP, f"{step.status}: no graph to compare")
    if step.export.graph_fingerprint == good.export.graph_fingerprint:
        return Verdict(version, Judgement.GOOD, "same graph as the good version")
    return Verdict(version, Judgement.BAD, f"graph changed ({_ops_text(good, step)})")


def op_count_diff(before: Record, after: Record) -> dict[str, list[int | None]]:
    """op_type -> [count before, count after], for the op types whose count changed; empty
    where either side has no graph (a failed export)."""
    if before.export.onnx_ops is None or after.export.onnx_ops is None:
        return {}
    a, b = before.export.onnx_ops, after.export.onnx_ops
    return {
        op: [a.get(op), b.get(op)] for op in sorted(a.keys() | b.keys()) if a.get(op) != b.get(op)
    }


def _ops_text(before: Record, after: Record) -> str:
    diff = op_count_diff(before, after)
    if not diff:
        return "same op counts"
    return ", ".join(f"{op} {a or 0}->{b or 0}" for op, (a, b) in list(diff.items())[:6]) + (
        f" and {len(diff) - 6} more" if len(diff) > 6 else ""
    )
