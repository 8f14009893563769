"""What dispatch decides, without Ray: how many cells of each kind run at once and in which
order, when a cell's clock starts and when its task is past saving, whether a task that
returned no record lost its node (the cell runs again elsewhere) or crashed (that is its
record), and which cells no alive node can run. Pure functions over plain state: the
driver (`harness.dispatch.driver`) feeds them what Ray reports and applies what they say;
the tests feed them hand-made states.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TypedDict, TypeVar

from harness.dispatch.flight import InFlight, Start, no_run, started
from harness.store.details import ColdStart
from harness.store.records import CellTask, Record
from harness.store.status import Status

GPU = "cuda"
CPU = "cpu"


class RayNode(TypedDict, total=False):  # a node as `ray.nodes()` lists it: the keys read here
    NodeID: str
    Alive: bool
    Resources: dict[str, float]
    NodeManagerHostname: str
    NodeManagerAddress: str


# A node whose raylet is killed is marked dead by Ray's GCS 11-15 s after its tasks' errors
# reach the driver (Ray 2.60 here: median 12.3 s, 11.0-14.5 s over 10 kills in
# benchmarks/test_node_loss.py; health checks every 3 s, dead after 5 failures). An
# unreachable machine takes longer: each check then waits for its 10 s timeout. A worker
# that died on a remote node is judged after at most this long.
NODE_SETTLE_S = 60.0
MAX_ATTEMPTS = 3
# The cell's own process is killed at its timeout (and its waits for the node, up to as long
# again) by the zygote; the driver kills the task itself only this much later: time for a new
# worker's zygote to start and prepare (imports, the exporter's warm-up) before its fork.
ISOLATION_GRACE_S = 120.0
POLL_S = 0.5  # how often the driver looks at its tasks, the start board and its clocks
BOARD_MISSES_MAX = 3  # drains in a row the start board did not answer: no board from then


def kind(task: CellTask) -> str:
    """The resources a cell takes: `cuda` (a GPU and `threads` CPUs) or `cpu` (CPUs only)."""
    return GPU if task.cell.device == GPU else CPU


@dataclass(frozen=True)
class Options:
    """How one `run_tasks` call dispatches."""

    timeout_s: float
    threads: int = 1
    max_in_flight: int | None = None  # caps the CPU slots (tests)
    variants: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    settle_s: float = NODE_SETTLE_S

    @property
    def backstop_s(self) -> float:
        """How long a cell's task may go without a result, from the cell's start: its
        timeout, as long again of waiting for the node, and the grace."""
        return 2 * self.timeout_s + ISOLATION_GRACE_S


# -- slots and the order cells go in ----------------------------------------------------------


@dataclass(frozen=True)
class Slots:
    """How many cells the alive nodes run at once. Every cell reserves `threads` CPUs; a
    CUDA cell also reserves one GPU, on a node that has both."""

    cpu: int
    gpu: int

    @classmethod
    def of_nodes(cls, nodes: Iterable[Mapping[str, float]], threads: int) -> Slots:
        """From each alive node's resources (Ray's `Resources`: CPU, GPU, ...)."""
        threads = max(1, threads)
        cpu = gpu = 0
        for resources in nodes:
            cells = int(resources.get("CPU", 0) // threads)
            cpu += cells
            gpu += min(int(resources.get("GPU", 0)), cells)
        return cls(cpu, gpu)

    def capped(self, max_in_flight: int | None) -> Slots:
        if max_in_flight is None:
            return self
        return Slots(max_in_flight, min(self.gpu, max_in_flight))

    def of(self, kind: str) -> int:
        return self.gpu if kind == GPU else self.cpu

    def fits(self, kind: str, *, running: int, running_gpu: int) -> bool:
        """Can one more cell of `kind` start beside the ones running?"""
        if kind == GPU and running_gpu >= self.gpu:
            return False
        return running < self.cpu

    def to_dict(self) -> dict[str, int]:
        return {"cpu": self.cpu, "gpu": self.gpu}


@dataclass(frozen=True)
class Nodes:
    """The cluster's nodes as the driver last saw them: which are alive, and the slots the
    alive ones give."""

    alive: Mapping[str, bool]
    slots: Slots
    # the memory the alive nodes offer cells (Ray's `memory` resource), GB; inf: not said
    memory_gb: float = math.inf

    @classmethod
    def of_ray(cls, nodes: Iterable[RayNode], options: Options) -> Nodes:
        """From `ray.nodes()`."""
        nodes = list(nodes)
        alive = {n["NodeID"]: bool(n.get("Alive")) for n in nodes}
        resources = [n.get("Resources", {}) for n in nodes if n.get("Alive")]
        slots = Slots.of_nodes(resources, options.threads).capped(options.max_in_flight)
        memory = [r["memory"] / 1024**3 for r in resources if "memory" in r]
        return cls(alive, slots, sum(memory) if memory else math.inf)

    def memory_free_gb(self, flights: Iterable[InFlight]) -> float:
        """What the alive nodes' memory leaves beside the cells in flight (their
        `memory_gb`): on one node, what a cell may reserve now; on several, at most that."""
        return self.memory_gb - sum(f.task.memory_gb or 0.0 for f in flights)


# -- the start board and the clocks -----------------------------------------------------------


@dataclass(frozen=True)
class Board:
    """The start board as the driver knows it: still asked (`up`), and how many drains in
    a row it has not answered."""

    up: bool = True
    misses: int = 0

    def due(self, last_drained: float, now: float) -> bool:
        """Is it time to drain it (every POLL_S while it is asked)?"""
        return self.up and now - last_drained >= POLL_S

    def on_submit(self, flight: InFlight) -> InFlight:
        """A cell submitted without a board to report to is timed from its submission."""
        return flight if self.up else replace(flight, started=flight.submitted)


def drained(
    board: Board, flights: Iterable[InFlight], starts: Sequence[Start] | None, now: float
) -> tuple[Board, list[InFlight]]:
    """The board after a drain, and the flights the drain started (`starts`, its reports;
    None where it did not answer). A board that does not answer (Ray restarts it) may have
    lost reports: the cells not known to run are taken to run from now, where is unknown;
    after BOARD_MISSES_MAX misses in a row it is not asked again."""
    if starts is None:
        misses = board.misses + 1
        return Board(misses < BOARD_MISSES_MAX, misses), [f.assumed_started(now) for f in flights]
    return Board(board.up, 0), started(flights, starts, now)


def past_backstop(flight: InFlight, now: float, options: Options) -> Record | None:
    """The `timeout` record of a task with no result past its backstop (its zygote, which
    kills the cell's process at the timeout, is stuck): the driver then kills its worker.
    None while it has time left."""
    if not flight.expired(now, options.backstop_s):
        return None
    reason = f"no result after {options.backstop_s:g} s; worker killed"
    return no_run(flight.task, Status.TIMEOUT, reason, flight, now=now)


# -- what the driver waits for ----------------------------------------------------------------


class Wait(StrEnum):
    """What the driver waits on in one turn of its loop."""

    TASKS = "tasks"  # tasks in flight: the first result, up to POLL_S
    IDLE = "idle"  # none in flight, but cells wait for a slot or a node to settle: POLL_S
    DONE = "done"  # nothing left


def wait_for(in_flight: int, *, pending: bool) -> Wait:
    """Tasks in flight are waited on; else cells `pending` (held for a slot, or dead tasks
    waiting for their node's state to settle) are waited for a poll."""
    if in_flight:
        return Wait.TASKS
    return Wait.IDLE if pending else Wait.DONE


Ref = TypeVar("Ref")


def queued(flights: Mapping[Ref, InFlight], kinds: Iterable[str]) -> dict[str, list[Ref]]:
    """By kind, the tasks submitted but not known to run (in Ray's queue, as far as the
    driver knows): keyed as `flights` is."""
    return {
        k: [ref for ref, f in flights.items() if kind(f.task) == k and f.started is None]
        for k in kinds
    }


def waiting(held: Mapping[str, Sized], queue: Mapping[str, Sized]) -> dict[str, int]:
    """How many cells of each kind wait for a slot: held back here, or queued in Ray."""
    return {k: len(held[k]) + len(queue.get(k, ())) for k in held}


class End(StrEnum):
    """How a task left the driver's hands."""

    COLLECTED = "collected"  # Ray returned its record or its error
    EXPIRED = "expired"  # killed past its backstop
    DROPPED = "dropped"  # cancelled while queued: no alive node can run it


def completes(end: End) -> bool:
    """Whether the task counts as completed: it ran (or was taken to run) to an end; a
    task cancelled in Ray's queue never ran."""
    return end is not End.DROPPED


# -- a task that returned no record: its node died, or its cell crashed ------------------------


class Evidence(StrEnum):
    """What a dead task's error says about its node."""

    NODE = "node"  # Ray says the node died (NodeDiedError, "node ... is dead or unavailable")
    WORKER = "worker"  # only the worker died: a crash of the cell, or its node going down


class Verdict(StrEnum):
    RETRY = "retry"  # the node was lost: run the cell again elsewhere
    OWN = "own"  # the cell's own failure, on a live node: its record stands
    WAIT = "wait"  # the node's state has not settled yet


class Failure(StrEnum):
    """What a task's Ray error says happened to it (`harness.dispatch.remote.failure_of`)."""

    DIED = "died"  # its worker, raylet or node died while it ran
    MEMORY_MONITOR = "memory_monitor"  # Ray's memory monitor killed it
    RAISED = "raised"  # the task raised (a bug of the harness's own code)
    OTHER = "other"


@dataclass(frozen=True)
class TaskFailure:
    """A task that returned no record, as plain data: what happened, Ray's message, what
    it says of the task's node, and the node it names."""

    failure: Failure
    message: str
    evidence: Evidence | None = None
    node: str | None = None


def failure_record(
    flight: InFlight, failed: TaskFailure, last_words: str | None, *, now: float
) -> Record:
    """The record of a cell whose task returned none: a dead worker (with the cell's
    faulthandler log where it left one), Ray's memory monitor, or the task's own error."""
    task, message = flight.task, failed.message
    if failed.failure is Failure.DIED:
        reason = f"worker process died while running the cell: {last_words or message}"
        return no_run(task, Status.CRASHED, reason, flight, now=now)
    if failed.failure is Failure.MEMORY_MONITOR:
        reason = f"killed by Ray's memory monitor: {message}"
        return no_run(task, Status.OOM, reason, flight, now=now)
    if failed.failure is Failure.RAISED:
        return no_run(task, Status.HARNESS_ERROR, f"task raised: {message}", flight, now=now)
    return no_run(task, Status.CRASHED, message, flight, now=now)


@dataclass(frozen=True)
class Suspect:
    """A cell whose task died, held until its node's state says whose fault it was."""

    flight: InFlight
    crashed: Record  # its record if the node turns out alive
    evidence: Evidence
    node: str | None  # where it ran: its start report, else Ray's error message
    since: float  # the driver's clock when the error arrived


def suspect_of(
    record: Record,
    flight: InFlight,
    evidence: Evidence | None,
    *,
    node: str | None,
    nodes: Nodes,
    last_words: bool,
    now: float,
) -> Suspect | None:
    """A task that returned no record, when its error arrives: a suspect, held until its
    node's state decides (`judge`), or None where its `record` stands now: where Ray says
    nothing of a death, or where the crash is plainly the cell's own: on a one-node
    cluster (a local run: the node is the driver's, and alive), or with a faulthandler log
    naming its fatal signal (`last_words`: a killed node's workers die without one)."""
    if evidence is None:
        return None
    lone = list(nodes.alive) == [node]
    if evidence is Evidence.WORKER and (lone or last_words):
        return None
    return Suspect(flight, record, evidence, node, now)


def judge(suspect: Suspect, *, node_alive: bool | None, now: float, settle_s: float) -> Verdict:
    """Retry where the node is dead, or never ran the cell; a crash on a node still alive
    (or unknown: a cell taken to run while its start board was unreachable) once Ray had
    `settle_s` to notice a death is the cell's own. Ray's own word that the node died
    stands when the node's state does not settle in time."""
    if node_alive is False:
        return Verdict.RETRY
    if suspect.flight.started is None and suspect.evidence is Evidence.WORKER:
        return Verdict.RETRY  # no start report: the worker died before the cell began
    if now - suspect.since < settle_s:
        return Verdict.WAIT
    return Verdict.RETRY if suspect.evidence is Evidence.NODE else Verdict.OWN


def settled(
    suspects: Sequence[Suspect], nodes: Nodes, *, now: float, settle_s: float
) -> tuple[list[tuple[Suspect, Verdict]], list[Suspect]]:
    """The suspects whose node's state has settled, each with its verdict (`judge`), and
    those still waiting."""
    decided: list[tuple[Suspect, Verdict]] = []
    waiting: list[Suspect] = []
    for suspect in suspects:
        alive = nodes.alive.get(suspect.node) if suspect.node else None
        verdict = judge(suspect, node_alive=alive, now=now, settle_s=settle_s)
        if verdict is Verdict.WAIT:
            waiting.append(suspect)
        else:
            decided.append((suspect, verdict))
    return decided, waiting


def next_attempt(suspect: Suspect) -> CellTask | Record:
    """A cell whose node was lost runs again, up to MAX_ATTEMPTS; then its record says so."""
    task = suspect.flight.task
    if task.attempt >= MAX_ATTEMPTS:
        reason = f"its node died or vanished in each of {MAX_ATTEMPTS} attempts"
        return no_run(task, Status.CRASHED, reason, suspect.flight)
    return replace(task, attempt=task.attempt + 1)


def outcome(suspect: Suspect, verdict: Verdict) -> CellTask | Record:
    """What a settled suspect comes to: its crash record where the crash was its own, else
    its next attempt (or the record that it has had its last)."""
    return suspect.crashed if verdict is Verdict.OWN else next_attempt(suspect)


def running_gpu(flights: Iterable[InFlight]) -> int:
    """How many of the flights hold a GPU."""
    return sum(1 for f in flights if kind(f.task) == GPU)


_NODE_ID = re.compile(r"node ID: ([0-9a-f]{16,})")


def node_in_message(message: str) -> str | None:
    """The node ID Ray names in a node-death message ("... node ID: 0ac1bf...")."""
    found = _NODE_ID.search(message)
    return found.group(1) if found else None


# -- cells no alive node can run --------------------------------------------------------------


def unrunnable(
    slots: Slots,
    waiting: Mapping[str, int],
    no_slot_since: Mapping[str, float],
    *,
    now: float,
    settle_s: float,
) -> tuple[frozenset[str], dict[str, float]]:
    """The kinds of cell to give up on: cells of the kind wait (held, or queued in Ray and
    not started) while no alive node has a slot for them (their nodes died, and none with
    their resources is left), and that has lasted `settle_s`, rather than waiting in a
    queue forever. Also since when each kind has waited without a slot."""
    since: dict[str, float] = {}
    for k, count in waiting.items():
        if count and slots.of(k) == 0:
            since[k] = no_slot_since.get(k, now)
    return frozenset(k for k, t in since.items() if now - t >= settle_s), since


def unrunnable_reason(kind: str, threads: int) -> str:
    need = f"{threads} CPUs" + (" and 1 GPU" if kind == GPU else "")
    return f"no alive node of the Ray cluster can run it (it needs {need})"


# -- the figures of one dispatch --------------------------------------------------------------


@dataclass
class DispatchStats:
    submitted: int = 0
    completed: int = 0
    timeouts: int = 0
    crashes: int = 0
    retried: int = 0
    not_attempted: int = 0
    max_in_flight: int = 0
    peak_in_flight: int = 0
    slots: Slots = field(default_factory=lambda: Slots(0, 0))
    peak_in_flight_gpu: int = 0
    lost_nodes: set[str] = field(default_factory=set)
    # How long each node-loss decision waited for the node's state to settle.
    settle_waits_s: list[float] = field(default_factory=list)
    # Each zygote's first export per exporter (harness.runtime.warmup), from every record
    # collected.
    cold_starts: list[ColdStart] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def count_final(self, record: Record) -> None:
        """A record handed over: crashes, timeouts and cells no node could run count."""
        self.crashes += record.status is Status.CRASHED
        self.timeouts += record.status is Status.TIMEOUT
        self.not_attempted += record.status is Status.NOT_ATTEMPTED

    def count_settled(self, suspect: Suspect, verdict: Verdict, now: float) -> None:
        """How long a dead task waited for its node's state, and the node it lost."""
        self.settle_waits_s.append(now - suspect.since)
        if verdict is Verdict.RETRY and suspect.node:
            self.lost_nodes.add(suspect.node)

    def count_end(self, end: End) -> None:
        self.completed += completes(end)

    def count_submitted(self, running: int, running_gpu: int) -> None:
        self.submitted += 1
        self.peak_in_flight = max(self.peak_in_flight, running)
        self.peak_in_flight_gpu = max(self.peak_in_flight_gpu, running_gpu)

    def note_cold_start(self, record: Record) -> None:
        worker = record.worker
        if worker is not None and worker.cold_start is not None:
            where = replace(
                worker.cold_start,
                node=worker.node,
                pid=worker.pid,  # the Ray worker's
                zygote_pid=worker.zygote_pid,
                variant=record.variant,
            )
            self.cold_starts.append(where)

    def figures(self) -> dict[str, object]:
        """The additive per-resource and node-loss figures of the manifest's `dispatch`."""
        return {
            "slots": self.slots.to_dict(),
            "peak_in_flight_gpu": self.peak_in_flight_gpu,
            "not_attempted": self.not_attempted,
            "lost_nodes": sorted(self.lost_nodes),
            "node_settle_s_max": round(max(self.settle_waits_s), 3)
            if self.settle_waits_s
            else None,
        }
