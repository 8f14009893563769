"""The loops that submit Ray tasks and collect their results in completion order:
`run_tasks` (the cells of a run) and `time_pairs` (`harness compare`'s paired timing).

`run_tasks` runs the loop of `harness.dispatch.loop` over `RayTasks`: the few calls it
makes to Ray (nodes, submit, wait, get, cancel, the start board), each carried out here and
nothing decided."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import ray
from ray import exceptions as ray_errors
from ray.actor import ActorHandle

from harness.dispatch import remote
from harness.dispatch.cluster import ClusterInfo, Runner, VersionProbe
from harness.dispatch.flight import Start, StartBoard
from harness.dispatch.loop import Driver
from harness.dispatch.policy import NODE_SETTLE_S, DispatchStats, Options, RayNode, TaskFailure
from harness.store.error_text import first_line
from harness.store.paired import PairResult, PairTask
from harness.store.records import CellTask, Record

DRAIN_S = 5.0


def run_tasks(
    tasks: Iterable[CellTask],
    on_record: Callable[[Record], None],
    *,
    timeout_s: float,
    threads: int = 1,
    max_in_flight: int | None = None,
    variants: dict[str, tuple[str, ...]] | None = None,
    settle_s: float = NODE_SETTLE_S,
) -> DispatchStats:
    """Run every task and hand each record to `on_record` as it arrives.

    Cells are submitted while a slot of their resources is free (CPU slots of `threads`
    CPUs; a CUDA cell also needs a GPU), so a CUDA cell waits here, not in Ray's queue,
    while CPU cells run. `max_in_flight` caps the CPU slots (tests). A cell whose node
    died is an infrastructure failure: it is submitted again (up to MAX_ATTEMPTS) and
    lands elsewhere. Anything else a cell does, a crash included, is its result and is
    never retried.
    """
    options = Options(timeout_s, threads, max_in_flight, variants or {}, settle_s)
    return _dispatch(tasks, on_record, options)


def _dispatch(
    tasks: Iterable[CellTask], on_record: Callable[[Record], None], options: Options
) -> DispatchStats:
    driver = Driver(tasks, on_record, options, RayTasks(options.variants))
    driver.run()
    return driver.stats


def runner(cluster: ClusterInfo) -> Runner:
    """The Ray instance `session.start` joined or started, as the pipeline runs on it."""

    def versions(
        variants: dict[str, tuple[str, ...]], distributions: tuple[str, ...]
    ) -> dict[str, VersionProbe]:
        return remote.variant_versions(variants, distributions=distributions)

    return Runner(cluster, _dispatch, versions, remote.node_versions, time_pairs)


class RayTasks:
    """`loop.Tasks` with Ray: each call is one of Ray's, on the driver's clock."""

    def __init__(self, variants: Mapping[str, tuple[str, ...]]) -> None:
        self.variants = variants
        self.board: ActorHandle[StartBoard] = remote.start_board()

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def nodes(self) -> list[RayNode]:
        return list(remote.nodes())

    def submit(
        self, task: CellTask, flight_id: int, *, report_start: bool
    ) -> ray.ObjectRef[Record]:
        board = self.board if report_start else None
        return remote.submit(task, self.variants, board, flight_id)

    def wait(
        self, refs: Sequence[ray.ObjectRef[Record]], timeout_s: float
    ) -> list[ray.ObjectRef[Record]]:
        ready, rest = ray.wait(list(refs), num_returns=1, timeout=timeout_s)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        return ready

    def result(self, ref: ray.ObjectRef[Record]) -> Record | TaskFailure:
        try:
            record: Record = ray.get(ref)
        except ray_errors.RayError as exc:
            return remote.failure_of(exc)
        return record

    def cancel(self, ref: ray.ObjectRef[Record]) -> None:
        ray.cancel(ref, force=True)

    def drain_starts(self) -> list[Start] | None:
        try:
            starts: list[Start] = ray.get(self.board.drain.remote(), timeout=DRAIN_S)
        except ray_errors.RayError:
            return None
        return starts


# -- paired re-measurement (harness compare) --------------------------------------------------


def time_pairs(tasks: Iterable[PairTask], on_result: Callable[[PairResult], None]) -> None:
    """Time each cell's two graphs together in one Ray task on its reserved cores, results
    in completion order; a task that dies is a result with its error."""
    refs = {remote.submit_pair(t): t for t in tasks}
    while refs:
        (ready,), _ = ray.wait(list(refs), num_returns=1)
        task = refs.pop(ready)
        try:
            on_result(ray.get(ready))
        except ray_errors.RayError as exc:
            on_result(PairResult(task.key, error=first_line(exc)))
