"""The loops that submit Ray tasks and collect their results in completion order:
`run_tasks` (the cells of a run) and `time_pairs` (`harness compare`'s paired timing).

The driver submits a cell while a slot of its resources is free (CPU slots, and GPUs for
CUDA cells), processes results with `ray.wait`, starts each cell's clock when its task
reports that it runs (to a start board actor), kills a task still running
`ISOLATION_GRACE_S` past its timeout, and holds a task that died until its node's state
says whether the node was lost (the cell runs again elsewhere) or the cell crashed. What
it decides lives in `harness.dispatch.policy`; it holds only the cells in flight and
waiting."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

import ray
from ray import exceptions as ray_errors
from ray.actor import ActorHandle

from harness.cell.limits import crash_log_path, read_crash_log
from harness.dispatch import remote
from harness.dispatch.policy import (
    GPU,
    NODE_SETTLE_S,
    Backlog,
    DispatchStats,
    InFlight,
    Nodes,
    Options,
    Start,
    Suspect,
    Verdict,
    kind,
    next_attempt,
    no_run,
    node_in_message,
    past_backstop,
    settled,
    started,
    suspect_of,
    unrunnable,
    unrunnable_reason,
)
from harness.store.error_text import first_line
from harness.store.paired import PairResult, PairTask
from harness.store.records import CellTask, Record
from harness.store.status import Status

POLL_S = 0.5
CLUSTER_REFRESH_S = 5.0  # nodes join and die mid-run: the slots follow
DRAIN_S = 5.0
BOARD_MISSES_MAX = 3  # drains in a row the start board did not answer: no board from then


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
    driver = _Driver(tasks, on_record, options)
    driver.run()
    return driver.stats


class _Driver:
    """The state of one `run_tasks` call: the cells waiting for a slot, in flight, and
    dead with their node's state not yet settled."""

    def __init__(
        self, tasks: Iterable[CellTask], on_record: Callable[[Record], None], options: Options
    ) -> None:
        self.backlog, self.on_record, self.options = Backlog(tasks), on_record, options
        self.in_flight: dict[ray.ObjectRef[Record], InFlight] = {}
        self.suspects: list[Suspect] = []
        self.flights = 0
        self.board: ActorHandle | None = remote.start_board()
        self.board_misses = 0
        self.drained = -math.inf
        self.refreshed, self.nodes = time.perf_counter(), Nodes.of_ray(ray.nodes(), options)
        self.no_slot_since: dict[str, float] = {}
        self.stats = DispatchStats(max_in_flight=self.nodes.slots.cpu, slots=self.nodes.slots)

    def run(self) -> None:
        while self.in_flight or self.suspects or self.backlog:
            self.refresh()
            self.fill()
            self.wait()
            self.read_starts()
            self.settle()
            self.expire()
            self.drop_unrunnable()

    def refresh(self, *, force: bool = False) -> None:
        """Which nodes are alive, and the slots they give (nodes join and die mid-run)."""
        now = time.perf_counter()
        if force or now - self.refreshed >= CLUSTER_REFRESH_S:
            self.refreshed, self.nodes = now, Nodes.of_ray(ray.nodes(), self.options)

    def fill(self) -> None:
        while True:
            running, running_gpu = len(self.in_flight), self._running_gpu()
            slots = self.nodes.slots
            task = self.backlog.next_fitting(slots, running=running, running_gpu=running_gpu)
            if task is None:
                return
            self.flights += 1
            flight = InFlight(task, self.flights)
            ref = remote.submit(task, self.options.variants, self.board, flight.flight_id)
            if self.board is None:  # no start reports: time the cell from its submission
                flight = replace(flight, started=flight.submitted)
            self.in_flight[ref] = flight
            self.stats.count_submitted(len(self.in_flight), self._running_gpu())

    def _running_gpu(self) -> int:
        return sum(1 for f in self.in_flight.values() if kind(f.task) == GPU)

    # -- results -------------------------------------------------------------------------

    def wait(self) -> None:
        if not self.in_flight:
            if self.suspects or self.backlog:  # waiting for a slot, or for a node to settle
                time.sleep(POLL_S)
            return
        ready, rest = ray.wait(list(self.in_flight), num_returns=1, timeout=POLL_S)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            self.collect(ref, self.in_flight.pop(ref))

    def collect(self, ref: ray.ObjectRef[Record], flight: InFlight) -> None:
        self.stats.completed += 1
        try:
            record: Record = ray.get(ref)
        except ray_errors.RayError as exc:
            self.lost(flight, exc)
            return
        self.stats.note_cold_start(record)
        self.final(flight.stamp(record))

    def lost(self, flight: InFlight, exc: ray_errors.RayError) -> None:
        """A task that returned no record: its record stands, or it waits for its node's
        state to settle (`policy.suspect_of`)."""
        if self.board is not None:  # where it ran, if it reported its start
            flights = [*self.in_flight.values(), flight]
            flight = self._drain_starts(self.board, flights, time.perf_counter()).get(
                flight.flight_id, flight
            )
        task = flight.task
        last_words = read_crash_log(crash_log_path(task.run_dir, task.cell.cell_id))
        record = remote.failure_record(flight, exc, last_words)
        suspect = suspect_of(
            record,
            flight,
            remote.evidence(exc),
            node=flight.node or node_in_message(str(exc)),
            nodes=self.nodes,
            last_words=last_words is not None,
            now=time.perf_counter(),
        )
        if suspect is None:
            self.final(record)
        else:
            self.suspects.append(suspect)

    def settle(self) -> None:
        """Decide the dead tasks whose node's state has settled (`policy.judge`)."""
        if not self.suspects:
            return
        self.refresh(force=True)
        now = time.perf_counter()
        decided, self.suspects = settled(
            self.suspects, self.nodes, now=now, settle_s=self.options.settle_s
        )
        for suspect, verdict in decided:
            self.stats.settle_waits_s.append(now - suspect.since)
            if verdict is Verdict.OWN:
                self.final(suspect.crashed)
                continue
            if suspect.node:
                self.stats.lost_nodes.add(suspect.node)
            again = next_attempt(suspect)
            if isinstance(again, Record):
                self.final(again)
            else:
                self.stats.retried += 1
                self.backlog.again(again)

    def final(self, record: Record) -> None:
        self.stats.count_final(record)
        self.on_record(record)

    # -- clocks --------------------------------------------------------------------------

    def read_starts(self) -> None:
        """Start each cell's clock when its task reports that it runs (every POLL_S)."""
        now = time.perf_counter()
        if self.board is not None and now - self.drained >= POLL_S:
            self._drain_starts(self.board, list(self.in_flight.values()), now)

    def _drain_starts(
        self, board: ActorHandle, flights: list[InFlight], now: float
    ) -> dict[int, InFlight]:
        """The flights the board's reports started, by id (those in flight updated); where
        it does not answer (Ray restarts it), reports may be lost: the cells not known to
        run are taken to run from now, where is unknown."""
        self.drained = now
        try:
            starts: list[Start] = ray.get(board.drain.remote(), timeout=DRAIN_S)
        except ray_errors.RayError:
            self.board_misses += 1
            self.board = None if self.board_misses >= BOARD_MISSES_MAX else board
            updated = [f.assumed_started(now) for f in flights]
        else:
            self.board_misses = 0
            updated = started(flights, starts, now)
        by_id = {f.flight_id: f for f in updated}
        self.in_flight = {ref: by_id.get(f.flight_id, f) for ref, f in self.in_flight.items()}
        return by_id

    def expire(self) -> None:
        """The driver's backstop, counted from the cell's start (`policy.past_backstop`):
        the task's worker is killed."""
        now = time.perf_counter()
        for ref, flight in list(self.in_flight.items()):
            if (record := past_backstop(flight, now, self.options)) is not None:
                ray.cancel(ref, force=True)
                del self.in_flight[ref]
                self.stats.completed += 1
                self.final(record)

    def drop_unrunnable(self) -> None:
        """Cells no alive node can run are recorded `not_attempted` (`policy.unrunnable`)."""
        held = self.backlog.held
        queued = {
            k: [r for r, f in self.in_flight.items() if kind(f.task) == k and f.started is None]
            for k in held
        }
        waiting = {k: len(held[k]) + len(queued[k]) for k in held}
        drop, self.no_slot_since = unrunnable(
            self.nodes.slots,
            waiting,
            self.no_slot_since,
            now=time.perf_counter(),
            settle_s=self.options.settle_s,
        )
        for k in (k for k in held if k in drop):
            reason = unrunnable_reason(k, self.options.threads)
            for ref in queued[k]:
                ray.cancel(ref, force=True)
                self.final(no_run(self.in_flight.pop(ref).task, Status.NOT_ATTEMPTED, reason))
            while held[k]:
                self.final(no_run(held[k].popleft(), Status.NOT_ATTEMPTED, reason))


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
