"""The driver's loop over the cells of a run, without Ray: it reaches Ray (and the clock)
through `Tasks`, a small interface that `harness.dispatch.driver.RayTasks` implements with
Ray and the tests with a stand-in.

It submits a cell while a slot of its resources is free (CPU slots, and GPUs for CUDA
cells) and the memory it reserves is (the first cell that fits goes), takes results in
completion order, starts each cell's clock when its task reports that it runs (to the
start board), kills a task still running `ISOLATION_GRACE_S` past
twice its timeout (`Options.backstop_s`), and holds a task that died until its node's state
says whether the node was lost (the cell runs again elsewhere) or the cell crashed. What it decides lives in
`harness.dispatch.policy`; it holds only the cells in flight and waiting."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar

from harness.dispatch.backlog import Backlog
from harness.dispatch.flight import InFlight, Start, no_run
from harness.dispatch.policy import (
    POLL_S,
    Board,
    DispatchStats,
    End,
    Nodes,
    Options,
    RayNode,
    Suspect,
    TaskFailure,
    Wait,
    drained,
    failure_record,
    outcome,
    past_backstop,
    queued,
    running_gpu,
    settled,
    suspect_of,
    unrunnable,
    unrunnable_reason,
    wait_for,
    waiting,
)
from harness.runtime.limits import crash_log_path, read_crash_log
from harness.store.records import CellTask, Record
from harness.store.status import Status

CLUSTER_REFRESH_S = 5.0  # nodes join and die mid-run: the slots follow

Ref = TypeVar("Ref", bound=Hashable)


class Tasks(Protocol[Ref]):
    """What the loop asks of Ray (and of the clock): the nodes, submitting, waiting for,
    collecting and cancelling a cell's task, and draining the start board."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def nodes(self) -> list[RayNode]:
        """As `ray.nodes()` lists them (NodeID, Alive, Resources)."""
        ...

    def submit(self, task: CellTask, flight_id: int, *, report_start: bool) -> Ref: ...

    def wait(self, refs: Sequence[Ref], timeout_s: float) -> list[Ref]:
        """The tasks done within `timeout_s` (at least one, if any is): all done by then."""
        ...

    def result(self, ref: Ref) -> Record | TaskFailure:
        """A finished task's record, or what Ray's error says happened to it."""
        ...

    def cancel(self, ref: Ref) -> None:
        """Kill the task (its worker too, where it runs)."""
        ...

    def drain_starts(self) -> list[Start] | None:
        """The start reports since the last drain; None where the board did not answer."""
        ...


class Driver(Generic[Ref]):
    """The state of one `run_tasks` call: the cells waiting for a slot, in flight, and
    dead with their node's state not yet settled."""

    def __init__(
        self,
        tasks: Iterable[CellTask],
        on_record: Callable[[Record], None],
        options: Options,
        ray: Tasks[Ref],
    ) -> None:
        self.backlog, self.on_record = Backlog(tasks), on_record
        self.options, self.ray = options, ray
        self.in_flight: dict[Ref, InFlight] = {}
        self.suspects: list[Suspect] = []
        self.flights = 0
        self.board, self.drained = Board(), -math.inf
        self.refreshed, self.nodes = ray.now(), Nodes.of_ray(ray.nodes(), options)
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
        now = self.ray.now()
        if force or now - self.refreshed >= CLUSTER_REFRESH_S:
            self.refreshed, self.nodes = now, Nodes.of_ray(self.ray.nodes(), self.options)

    def fill(self) -> None:
        while True:
            flights = self.in_flight.values()
            running, gpu = len(self.in_flight), running_gpu(flights)
            free = self.nodes.memory_free_gb(flights)
            slots = self.nodes.slots
            task = self.backlog.next_fitting(
                slots, running=running, running_gpu=gpu, memory_free_gb=free
            )
            if task is None:
                return
            self.flights += 1
            flight = InFlight(task, self.flights, submitted=self.ray.now())
            ref = self.ray.submit(task, flight.flight_id, report_start=self.board.up)
            self.in_flight[ref] = self.board.on_submit(flight)
            self.stats.count_submitted(len(self.in_flight), running_gpu(self.in_flight.values()))

    # -- results -------------------------------------------------------------------------

    def wait(self) -> None:
        waits = wait_for(len(self.in_flight), pending=bool(self.suspects or self.backlog))
        if waits is Wait.IDLE:  # waiting for a slot, or for a node to settle
            self.ray.sleep(POLL_S)
        if waits is not Wait.TASKS:
            return
        for ref in self.ray.wait(list(self.in_flight), POLL_S):
            self.collect(ref, self.in_flight.pop(ref))

    def collect(self, ref: Ref, flight: InFlight) -> None:
        self.stats.count_end(End.COLLECTED)
        result = self.ray.result(ref)
        if isinstance(result, TaskFailure):
            self.lost(flight, result)
            return
        self.stats.note_cold_start(result)
        self.final(flight.stamp(result))

    def lost(self, flight: InFlight, failed: TaskFailure) -> None:
        """A task that returned no record: its record stands, or it waits for its node's
        state to settle (`policy.suspect_of`)."""
        if self.board.up:  # where it ran, if it reported its start
            flights = [*self.in_flight.values(), flight]
            flight = self._drain_starts(flights, self.ray.now()).get(flight.flight_id, flight)
        record, suspect = _judged(flight, failed, self.nodes, self.ray.now())
        if suspect is None:
            self.final(record)
        else:
            self.suspects.append(suspect)

    def settle(self) -> None:
        """Decide the dead tasks whose node's state has settled (`policy.judge`)."""
        if not self.suspects:
            return
        self.refresh(force=True)
        now = self.ray.now()
        decided, self.suspects = settled(
            self.suspects, self.nodes, now=now, settle_s=self.options.settle_s
        )
        for suspect, verdict in decided:
            self.stats.count_settled(suspect, verdict, now)
            again = outcome(suspect, verdict)
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
        now = self.ray.now()
        if self.board.due(self.drained, now):
            self._drain_starts(list(self.in_flight.values()), now)

    def _drain_starts(self, flights: list[InFlight], now: float) -> dict[int, InFlight]:
        """The flights the board's reports started, by id (those in flight updated);
        `policy.drained` says what a board that does not answer means."""
        self.drained = now
        self.board, updated = drained(self.board, flights, self.ray.drain_starts(), now)
        by_id = {f.flight_id: f for f in updated}
        self.in_flight = {ref: by_id.get(f.flight_id, f) for ref, f in self.in_flight.items()}
        return by_id

    def expire(self) -> None:
        """The driver's backstop, counted from the cell's start (`policy.past_backstop`):
        the task's worker is killed."""
        now = self.ray.now()
        for ref, flight in list(self.in_flight.items()):
            if (record := past_backstop(flight, now, self.options)) is not None:
                self.ray.cancel(ref)
                del self.in_flight[ref]
                self.stats.count_end(End.EXPIRED)
                self.final(record)

    def drop_unrunnable(self) -> None:
        """Cells no alive node can run are recorded `not_attempted` (`policy.unrunnable`)."""
        held = self.backlog.held
        queue = queued(self.in_flight, held)
        now, settle_s = self.ray.now(), self.options.settle_s
        counts, since = waiting(held, queue), self.no_slot_since
        drop, self.no_slot_since = unrunnable(
            self.nodes.slots, counts, since, now=now, settle_s=settle_s
        )
        for k in (k for k in held if k in drop):
            reason = unrunnable_reason(k, self.options.threads)
            for ref in queue[k]:
                self.ray.cancel(ref)
                self.stats.count_end(End.DROPPED)
                self.final(no_run(self.in_flight.pop(ref).task, Status.NOT_ATTEMPTED, reason))
            while held[k]:
                self.final(no_run(held[k].popleft(), Status.NOT_ATTEMPTED, reason))


def _judged(
    flight: InFlight, failed: TaskFailure, nodes: Nodes, now: float
) -> tuple[Record, Suspect | None]:
    """A lost task's record (with the cell's last words, where its faulthandler left them)
    and, where its node's state must decide whether it stands, the suspect to hold."""
    task = flight.task
    last_words = read_crash_log(crash_log_path(task.run_dir, task.cell.cell_id))
    record = failure_record(flight, failed, last_words, now=now)
    suspect = suspect_of(
        record,
        flight,
        failed.evidence,
        node=flight.node or failed.node,
        nodes=nodes,
        last_words=last_words is not None,
        now=now,
    )
    return record, suspect
