"""The shell of `harness bisect`: runs one package set at a time on one Ray instance, as
`harness run --variant` runs a variant (a Ray runtime_env that pip installs the set on top
of this environment), and compares it with the good one as `harness compare` does. It
gathers state and carries decisions out; what to try and what it means is decided in
`harness.bisect.search` and `harness.bisect.verdict`.

Before a set runs, pip resolves it without installing (`pip install --dry-run`) and a task
in its runtime_env checks that each package is there at the version asked and imports: a
set that fails either is skipped with pip's or Python's reason, and no cell runs in it."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.bisect.index import PipSource, dry_run
from harness.bisect.probe import unusable
from harness.bisect.sets import (
    GRAPHS,
    RUNS,
    Attempt,
    ComparesSets,
    PackageSet,
    TimePairs,
    asked_distributions,
)
from harness.pipeline.execute import execute_on, harness_env
from harness.plan.build import RunPlan, new_run_id
from harness.plan.matrix import Matrix
from harness.store.runs import Run, read_run, variant_run

if TYPE_CHECKING:
    from harness.dispatch.cluster import ClusterInfo


class Runner(ComparesSets):
    """Runs package sets of the selected cells into OUT/runs/, keeping every ok cell's graph
    in OUT/graphs (shared, content-addressed) for the paired timings. The sets of one batch
    run together, as variants of one run: their runtime_envs build and their cells run side
    by side, on as many cores or nodes as Ray has."""

    def __init__(
        self, selection: RunPlan, out: Path, source: PipSource, *, stream: TextIO | None = None
    ) -> None:
        self.selection, self.out, self.source = selection, out, source
        self.stream = stream or sys.stderr
        self.cells = {c.key: c for c in selection.matrix.cells}
        self.cluster: ClusterInfo | None = None  # once entered

    def __enter__(self) -> Runner:
        from harness.dispatch import session  # ray is imported only when a bisection starts

        self.cluster = session.start(self.selection.options.address, env_vars=harness_env())
        return self

    def __exit__(self, *exc: object) -> None:
        from harness.dispatch import session

        session.stop()

    def run_sets(self, sets: Sequence[PackageSet]) -> list[Attempt]:
        """Run each set on top of this environment for its cells, or say why it cannot be."""
        started = time.perf_counter()
        checked = {s.label: dry_run(s.requirements, self.source) for s in sets}
        skipped = {s.label: str(checked[s.label].reason) for s in sets if not checked[s.label].ok}
        skipped |= self._probe([s for s in sets if s.label not in skipped])
        runnable = [s for s in sets if s.label not in skipped]
        run, run_dir = self._run(runnable) if runnable else (None, None)
        seconds = round(time.perf_counter() - started, 1)
        attempts = []
        for s in sets:
            if s.label in skipped or run is None:
                attempts.append(
                    Attempt(s.label, s.requirements, skipped=skipped.get(s.label), seconds=seconds)
                )
                continue
            relabelled = variant_run(run, s.variant, label="base")
            installs = checked[s.label].installs
            attempts.append(
                Attempt(
                    s.label, s.requirements, relabelled, run_dir, None, installs, seconds, s.variant
                )
            )
        return attempts

    def _probe(self, sets: Sequence[PackageSet]) -> dict[str, str]:
        """Why each set that cannot be used cannot, as its runtime_env sees it: not set up,
        a package missing or at another version, or an import that fails."""
        from harness.dispatch import remote

        if not sets:
            return {}
        found = remote.variant_versions(
            {s.variant: self._specs(s) for s in sets}, distributions=asked_distributions(sets)
        )
        reasons = {s.label: unusable(s.requirements, found[s.variant]) for s in sets}
        return {label: reason for label, reason in reasons.items() if reason}

    def _specs(self, s: PackageSet) -> tuple[str, ...]:
        return (*s.requirements, *self.source.options())

    def _run(self, sets: Sequence[PackageSet]) -> tuple[Run, str]:
        """The sets' cells as variants of one run: the run, and its directory."""
        run_dir = self._run_dir("+".join(s.variant for s in sets))
        plan = self._plan(sets, run_dir)
        variants = [f"--variant={s.variant}={','.join(self._specs(s))}" for s in sets]
        assert self.cluster is not None, "a Runner runs cells within its `with` block"
        from harness.dispatch import driver

        runner = driver.runner(self.cluster)
        execute_on(runner, plan, ["harness", "bisect", *variants], stream=self.stream)
        return read_run(run_dir), str(run_dir.relative_to(self.out))

    def _run_dir(self, name: str) -> Path:
        base = self.out / RUNS / (name if len(name) <= 120 else f"{name[:100]}+more")
        n, path = 1, base
        while path.exists():  # the same set again, for other cells
            n += 1
            path = base.with_name(f"{base.name}.{n}")
        return path

    def _plan(self, sets: Sequence[PackageSet], run_dir: Path) -> RunPlan:
        cells = tuple(self.cells[k].replace(variant=s.variant) for s in sets for k in s.keys)
        options = replace(
            self.selection.options,
            out=str(run_dir),
            variants=tuple(f"{s.variant}={','.join(self._specs(s))}" for s in sets),
            keep_graphs=str((self.out / GRAPHS).resolve()),
        )
        names = ", ".join(s.variant for s in sets)
        return replace(
            self.selection,
            run_id=new_run_id(),
            run_dir=run_dir,
            options=options,
            matrix=Matrix(tuple(sorted(cells)), f"{len(cells)} cells of {names}"),
            variants={s.variant: self._specs(s) for s in sets},
        )

    def _time_pairs(self) -> TimePairs:
        from harness.dispatch import driver

        return driver.time_pairs
