"""What a bisection's runners share: the package set to run (`PackageSet`), what became of
it (`Attempt`), the interface both runners satisfy (`SetRunner`: a Ray runtime_env per set,
`harness.bisect.runner`, or a Python environment of its own per set,
`harness.bisect.isolated`), and the steps they do the same way: whether a set's environment
holds what it asked for (`harness.bisect.probe`), and `harness compare` of a set with the good one."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol, TextIO

from harness.bisect.result import EnvUse
from harness.compare import Comparison, Options, compare_runs
from harness.compare.paired import pair_tasks
from harness.store.paired import PairResult, PairTask
from harness.store.records import Cell, CellKey
from harness.store.runs import Run

if TYPE_CHECKING:
    from harness.plan.build import RunPlan

RUNS = "runs"
GRAPHS = "graphs"

TimePairs = Callable[[Iterable[PairTask], Callable[[PairResult], None]], None]


@dataclass(frozen=True)
class PackageSet:
    """Requirements to install on top of this environment, and the cells to run with them."""

    label: str
    requirements: tuple[str, ...]
    keys: tuple[CellKey, ...]

    @property
    def variant(self) -> str:
        """Its variant name (`[a-z0-9_.-]+`) in the run directory."""
        return re.sub(r"[^a-z0-9_.\-]+", "_", self.label.lower()).strip("_") or "set"


@dataclass(frozen=True)
class Attempt:
    """One package set run (or skipped): its run relabelled as the `base` variant, so that
    any two attempts compare cell by cell; `run_dir` is where it ran (relative to the
    bisection's folder), `seconds` the wall time of the batch it ran in; `environment`, the
    Python environment it ran in (`--isolation env`)."""

    label: str
    requirements: tuple[str, ...]
    run: Run | None = None
    run_dir: str | None = None
    skipped: str | None = None
    installs: tuple[str, ...] = ()
    seconds: float = 0.0
    variant: str = ""
    environment: EnvUse | None = None


class SetRunner(Protocol):
    """Runs package sets of the selected cells and compares them (`harness.bisect.session`
    drives one): `cells` are the selected cells by key."""

    @property
    def cells(self) -> Mapping[CellKey, Cell]: ...

    def run_sets(self, sets: Sequence[PackageSet]) -> list[Attempt]: ...

    def compare(self, good: Run, step: Run, *, timed: Iterable[CellKey] = ()) -> Comparison: ...

    def time_together(
        self, before: Run, after: Run, keys: Iterable[CellKey]
    ) -> dict[CellKey, PairResult]: ...


class ComparesSets:
    """`compare` and `time_together` as both runners do them: they differ only in where the
    two graphs are timed together (`_time_pairs`: on Ray or on this machine)."""

    selection: RunPlan
    stream: TextIO

    def _time_pairs(self) -> TimePairs:
        raise NotImplementedError

    def compare(self, good: Run, step: Run, *, timed: Iterable[CellKey] = ()) -> Comparison:
        """`harness compare good step` (`compare_sets`)."""
        return compare_sets(good, step, timed, self)

    def time_together(
        self, before: Run, after: Run, keys: Iterable[CellKey]
    ) -> dict[CellKey, PairResult]:
        threads = self.selection.options.threads
        return time_together(
            before, after, keys, threads=threads, time_pairs=self._time_pairs(), stream=self.stream
        )


def compare_sets(
    good: Run, step: Run, timed: Iterable[CellKey], together: ComparesSets
) -> Comparison:
    """`harness compare good step` on the cells `step` ran: the cells of `timed` whose graph
    changed are timed again together with the good version's graph, and that verdict
    decides latency."""
    ran = {r.cell.key for r in step.records}
    good = replace(good, records=tuple(r for r in good.records if r.cell.key in ran))
    paired = together.time_together(good, step, timed)
    return compare_runs(good, step, Options(paired=paired))


def time_together(
    before: Run,
    after: Run,
    keys: Iterable[CellKey],
    *,
    threads: int,
    time_pairs: TimePairs,
    stream: TextIO | None = None,
) -> dict[CellKey, PairResult]:
    """The two runs' graphs of `keys` (where they differ) timed together, interleaved in one
    process, by `time_pairs` (Ray's or this machine's)."""
    wanted = set(keys)
    tasks, _ = pair_tasks(before, after, threads=threads)
    tasks = [t for t in tasks if t.key in wanted]
    results: dict[CellKey, PairResult] = {}
    if tasks:
        print(
            f"  timing {len(tasks)} changed graphs in interleaved pairs", file=stream or sys.stderr
        )
        time_pairs(tasks, lambda r: results.__setitem__(r.key, r))
    return results


def asked_distributions(sets: Iterable[PackageSet]) -> tuple[str, ...]:
    """The distributions the sets' requirements name (`onnx-ir==1.1.0` -> `onnx-ir`)."""
    return tuple(sorted({r.partition("==")[0] for s in sets for r in s.requirements}))
