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
    # (method, verified, attempted): graph, module (issue 37), none
    by_method: tuple[tuple[str, int, int], ...] = ()
    # module repros with a script: the kept module's parameters before (the model) and
    # after, and its path's depth in the model (model.layers.13.mlp: 4)
    params_before: Spread | None = None
    params_after: Spread | None = None
    module_depth: Spread | None = None

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
        if self.by_method:
            each = ", ".join(f"{m} {v} of {n}" for m, v, n in self.by_method)
            lines.append(f"reproduce in a fresh process, by method: {each}")
        if self.params_before and self.params_after and self.module_depth:
            lines.append(f"module repros, parameters before: {self.params_before.text()}")
            lines.append(f"module repros, parameters after: {self.params_after.text()}")
            lines.append(f"module repros, module path depth: {self.module_depth.text()}")
        lines += [f"no repro ({n}): {why}" for why, n in self.no_repro]
        return lines


def figures(records: Sequence[Record]) -> Figures:
    made = [r.minimal_repro for r in records if r.minimal_repro]
    scripted = [m for m in made if m.nodes_after is not None and m.verify]
    modules = [m for m in made if m.params_after is not None and m.verify]
    methods = Counter(m.method or "none" for m in made)
    verified = Counter(m.method or "none" for m in made if m.reproduces)
    reasons = Counter(_short(m) for m in made if not m.reproduces)
    return Figures(
        attempted=len(made),
        scripts=len(scripted) + len(modules),
        verified=sum(1 for m in made if m.reproduces),
        nodes_before=Spread.of([m.nodes_before for m in scripted if m.nodes_before is not None]),
        nodes_after=Spread.of([m.nodes_after for m in scripted if m.nodes_after is not None]),
        wall_s=Spread.of([m.wall_s for m in made if m.wall_s is not None]),
        bound_s=next((m.bound_s for m in made if m.bound_s is not None), None),
        no_repro=tuple(reasons.most_common()),
        by_method=tuple((k, verified[k], n) for k, n in sorted(methods.items())),
        params_before=Spread.of([m.params_before for m in modules if m.params_before is not None]),
        params_after=Spread.of([m.params_after for m in modules if m.params_after is not None]),
        module_depth=Spread.of([len((m.module or "").split(".")) for m in modules]),
    )


def _short(summary: MinimalRepro) -> str:
    if summary.verify and not summary.reproduces:
        return "the script did not reproduce the failure in a fresh process"
    reason = summary.reason or "no reason given"
    return reason.split(":")[0][:100]
