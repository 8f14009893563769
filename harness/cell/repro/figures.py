"""The minimizer's figures over a run's records (pure, no torch): how many cells got a
repro that reproduces in a fresh process, node counts before and after, time per cell."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from harness.stats import percentile
from harness.store.details import MinimalRepro
from harness.store.records import Record


@dataclass(frozen=True)
class Spread:
    median: float
    p90: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread | None:
        if not values:
            return None
        return cls(percentile(values, 50), percentile(values, 90), max(values))

    def text(self, unit: str = "") -> str:
        return f"median {self.median:.3g}{unit}, p90 {self.p90:.3g}{unit}, max {self.max:.3g}{unit}"


@dataclass(frozen=True)
class Figures:
    attempted: int
    scripts: int  # a repro_min.py was written
    verified: int  # it reproduced in a fresh process
    nodes_before: Spread | None
    nodes_after: Spread | None
    wall_s: Spread | None
    bound_s: float | None
    no_repro: tuple[tuple[str, int], ...]  # why not, most common first

    def lines(self) -> list[str]:
        lines = [
            f"{self.verified} of {self.attempted} cells with a repro that reproduces in a fresh"
            f" process ({self.scripts} scripts written)"
        ]
        if self.nodes_before and self.nodes_after:
            lines.append(f"nodes before: {self.nodes_before.text()}")
            lines.append(f"nodes after: {self.nodes_after.text()}")
        if self.wall_s:
            bound = f" (search bound {self.bound_s:g} s)" if self.bound_s is not None else ""
            lines.append(f"minimizer time per cell: {self.wall_s.text(' s')}{bound}")
        lines += [f"no repro ({n}): {why}" for why, n in self.no_repro]
        return lines


def figures(records: Sequence[Record]) -> Figures:
    made = [r.minimal_repro for r in records if r.minimal_repro]
    scripted = [m for m in made if m.nodes_after is not None and m.verify]
    reasons = Counter(_short(m) for m in made if not m.reproduces)
    return Figures(
        attempted=len(made),
        scripts=len(scripted),
        verified=sum(1 for m in made if m.reproduces),
        nodes_before=Spread.of([m.nodes_before for m in scripted if m.nodes_before is not None]),
        nodes_after=Spread.of([m.nodes_after for m in scripted if m.nodes_after is not None]),
        wall_s=Spread.of([m.wall_s for m in made if m.wall_s is not None]),
        bound_s=next((m.bound_s for m in made if m.bound_s is not None), None),
        no_repro=tuple(reasons.most_common()),
    )


def _short(summary: MinimalRepro) -> str:
    if summary.verify and not summary.reproduces:
        return "the script did not reproduce the failure in a fresh process"
    reason = summary.reason or "no reason given"
    return reason.split(":")[0][:100]
