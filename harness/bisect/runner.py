"""The shell of `harness bisect`: runs one package set at a time on one Ray instance, as
`harness run --variant` runs a variant (a Ray runtime_env that pip installs the set on top
of this environment), and compares it with the good one as `harness compare` does. It
gathers state and carries decisions out; what to try and what it means is decided in
`harness.bisect.search` and `harness.bisect.verdict`.

Before a set runs, pip resolves it without installing (`pip install --dry-run`) and a task
in its runtime_env checks that each package is there at the version asked and imports: a
set that fails either is skipped with pip's or Python's reason, and no cell runs in it."""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from packaging.version import InvalidVersion, Version

from harness.bisect.index import PipSource, dry_run
from harness.commands.run import execute_on, harness_env
from harness.compare import Comparison, Options, compare_runs
from harness.compare.paired import pair_tasks
from harness.plan.build import RunPlan, new_run_id
from harness.plan.matrix import Matrix
from harness.store.paired import PairResult
from harness.store.records import Cell
from harness.store.runs import CellKey, Run, read_run, variant_run

RUNS = "runs"
GRAPHS = "graphs"


@dataclass(frozen=True)
class Attempt:
    """One package set run (or skipped): its run relabelled as the `base` variant, so that
    any two attempts compare cell by cell."""

    label: str
    requirements: tuple[str, ...]
    run: Run | None = None
    run_dir: str | None = None
    skipped: str | None = None
    installs: tuple[str, ...] = ()
    seconds: float = 0.0


def variant_label(text: str) -> str:
    """A variant name (`[a-z0-9_.-]+`) from a package set's label."""
    return re.sub(r"[^a-z0-9_.\-]+", "_", text.lower()).strip("_") or "set"


class Runner:
    """Runs package sets of the selected cells into OUT/runs/<label>/, keeping every ok
    cell's graph in OUT/graphs (shared, content-addressed) for the paired timings."""

    def __init__(
        self, selection: RunPlan, out: Path, source: PipSource, *, stream: TextIO = sys.stderr
    ) -> None:
        self.selection, self.out, self.source, self.stream = selection, out, source, stream
        self.cells = {c.key: c for c in selection.matrix.cells}
        self.cluster: Any = None

    def __enter__(self) -> Runner:
        from harness import dispatch  # ray is imported only when a bisection really starts

        self.cluster = dispatch.start(self.selection.options.address, env_vars=harness_env())
        return self

    def __exit__(self, *exc: object) -> None:
        from harness import dispatch

        dispatch.stop()

    def attempt(
        self, label: str, requirements: tuple[str, ...], keys: Iterable[CellKey]
    ) -> Attempt:
        """Run `requirements` on top of this environment for the cells `keys`, or say why not."""
        started = time.perf_counter()
        name = variant_label(label)
        specs = (*requirements, *self.source.options())
        installable = dry_run(requirements, self.source)
        skipped = (
            installable.reason if not installable.ok else self._probe(name, specs, requirements)
        )
        if skipped:
            return Attempt(
                label, requirements, skipped=skipped, seconds=time.perf_counter() - started
            )
        run_dir = self._run_dir(name)
        plan = self._plan(name, specs, [self.cells[k] for k in keys], run_dir)
        execute_on(
            self.cluster,
            plan,
            ["harness", "bisect", "--variant", f"{name}={','.join(specs)}"],
            stream=self.stream,
        )
        run = variant_run(read_run(run_dir), name, label="base")
        return Attempt(
            label,
            requirements,
            run=run,
            run_dir=str(run_dir.relative_to(self.out)),
            installs=installable.installs,
            seconds=time.perf_counter() - started,
        )

    def _probe(
        self, name: str, specs: tuple[str, ...], requirements: tuple[str, ...]
    ) -> str | None:
        """Why the set cannot be used, as its runtime_env sees it: not installed, another
        version installed, or an import that fails."""
        from harness import dispatch

        wanted = dict(r.split("==", 1) for r in requirements)
        found = dispatch.variant_versions({name: specs}, distributions=tuple(wanted))[name]
        if "error" in found:
            return f"its runtime_env could not be set up: {found['error']}"
        for package, version in wanted.items():
            status = (found.get("distributions") or {}).get(package) or {}
            have = status.get("version")
            if have is None or not _same_version(have, version):
                return f"{package} {version} asked, {have or 'nothing'} installed"
            if status.get("import_error"):
                return f"{package} {version} does not import: {status['import_error']}"
        return None

    def _run_dir(self, name: str) -> Path:
        base = self.out / RUNS / name
        n, path = 1, base
        while path.exists():  # the same set again, for other cells
            n += 1
            path = base.with_name(f"{name}.{n}")
        return path

    def _plan(self, name: str, specs: tuple[str, ...], cells: list[Cell], run_dir: Path) -> RunPlan:
        chosen = tuple(replace(c, variant=name) for c in cells)
        options = replace(
            self.selection.options,
            out=str(run_dir),
            variants=(f"{name}={','.join(specs)}",),
            keep_graphs=str((self.out / GRAPHS).resolve()),
        )
        announcement = f"{len(chosen)} cells with {name}: {', '.join(c.label() for c in cells)}"
        return replace(
            self.selection,
            run_id=new_run_id(),
            run_dir=run_dir,
            options=options,
            matrix=Matrix(chosen, announcement),
            variants={name: specs},
        )

    def compare(self, good: Run, step: Run, *, timed: Iterable[CellKey] = ()) -> Comparison:
        """`harness compare good step`: the cells of `timed` whose graph changed are timed
        again together with the good version's graph, and that verdict decides latency."""
        ran = {r.cell.key for r in step.records}
        good = replace(good, records=tuple(r for r in good.records if r.cell.key in ran))
        paired = self.time_together(good, step, timed)
        return compare_runs(good, step, Options(paired=paired))

    def time_together(
        self, before: Run, after: Run, keys: Iterable[CellKey]
    ) -> dict[CellKey, PairResult]:
        from harness import dispatch

        wanted = set(keys)
        tasks, _ = pair_tasks(before, after, threads=self.selection.options.threads)
        tasks = [t for t in tasks if t.key in wanted]
        results: dict[CellKey, PairResult] = {}
        if tasks:
            print(f"  timing {len(tasks)} changed graphs in interleaved pairs", file=self.stream)
            dispatch.time_pairs(tasks, lambda r: results.__setitem__(r.key, r))
        return results


def _same_version(installed: str, asked: str) -> bool:
    try:
        return Version(installed) == Version(asked)
    except InvalidVersion:
        return installed == asked
