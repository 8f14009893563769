"""What dispatch decides without Ray: how many cells of each kind run at once, when a
cell's clock starts, how a variant's packages become a Ray runtime_env, and whether a cell whose worker died lost its node (it runs again
elsewhere) or crashed (that is its record). Pure: `harness/dispatch.py` feeds it what Ray
reports, and the tests feed it hand-made states.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from harness.store.records import CellTask, Record
from harness.store.status import Status

GPU = "cuda"
# A node whose raylet is killed is marked dead by Ray's GCS 11-15 s after its tasks' errors
# reach the driver (Ray 2.60 here: median 12.3 s, 11.0-14.5 s over 10 kills in
# benchmarks/test_node_loss.py; health checks every 3 s, dead after 5 failures). An
# unreachable machine takes longer: each check then waits for its 10 s timeout. A worker
# that died on a remote node is judged after at most this long.
NODE_SETTLE_S = 60.0
MAX_ATTEMPTS = 3
HELD_MAX = 1000  # cells held back for a slot of their kind, at most


def kind(task: CellTask) -> str:
    """The resources a cell takes: `cuda` (a GPU and `threads` CPUs) or `cpu` (CPUs only)."""
    return GPU if task.cell.device == GPU else "cpu"


@dataclass(frozen=True)
class ClusterInfo:
    """The Ray cluster a run uses, as the manifest records it."""

    address: str
    nodes: list[dict[str, Any]]
    resources: dict[str, float]

    @classmethod
    def of_ray(
        cls, address: str, nodes: list[dict[str, Any]], resources: Mapping[str, float]
    ) -> ClusterInfo:
        """From `ray.nodes()` and `ray.cluster_resources()` (node-id resources left out)."""
        described = [
            {
                "node_id": n["NodeID"],
                "host": n.get("NodeManagerHostname"),
                "address": n.get("NodeManagerAddress"),
                "alive": n.get("Alive"),
                "resources": {
                    k: v for k, v in n.get("Resources", {}).items() if not k.startswith("node:")
                },
            }
            for n in nodes
        ]
        total = {k: v for k, v in resources.items() if not k.startswith("node:")}
        return cls(address, described, total)

    @property
    def has_gpus(self) -> bool:
        return self.resources.get("GPU", 0) > 0

    def slots(self, threads: int) -> Slots:
        """How many cells its alive nodes run at once, per resource."""
        return Slots.of_nodes((n["resources"] for n in self.nodes if n["alive"]), threads)


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


class Backlog:
    """The cells not submitted yet: new ones from the plan (pulled lazily, so a 10 000-cell
    run holds few), and those held back, for a slot of their kind or to run again."""

    def __init__(self, tasks: Iterable[CellTask], *, held_max: int = HELD_MAX) -> None:
        self._new = iter(tasks)
        self.exhausted = False
        self.held: dict[str, deque[CellTask]] = {GPU: deque(), "cpu": deque()}
        self.held_max = held_max

    def __bool__(self) -> bool:
        return not self.exhausted or any(self.held.values())

    def again(self, task: CellTask) -> None:
        """A cell to run again (its node was lost): before any other of its kind."""
        self.held[kind(task)].appendleft(task)

    def next_fitting(self, slots: Slots, *, running: int, running_gpu: int) -> CellTask | None:
        """The next cell that fits a free slot: held ones first (CUDA before CPU: the GPU
        is the scarce resource), then new ones; a new cell that does not fit is held with
        its kind, and the CPU cells behind it still go."""
        for k, queue in self.held.items():
            if queue and slots.fits(k, running=running, running_gpu=running_gpu):
                return queue.popleft()
        while not self.exhausted and sum(map(len, self.held.values())) < self.held_max:
            task = next(self._new, None)
            if task is None:
                self.exhausted = True
                break
            k = kind(task)
            if not self.held[k] and slots.fits(k, running=running, running_gpu=running_gpu):
                return task
            self.held[k].append(task)
        return None


@dataclass
class InFlight:
    """A submitted cell. Its clock starts when its task reports that it runs (`started`),
    not at submission: a cell waiting in Ray's queue is not running out of time."""

    task: CellTask
    flight_id: int
    submitted: float = field(default_factory=time.perf_counter)
    submitted_at: float = field(default_factory=time.time)
    started: float | None = None  # the driver's clock when the start report arrived
    started_at: float | None = None  # the worker's wall clock at its start
    node: str | None = None
    host: str | None = None
    pid: int | None = None

    def start(self, *, node: str, host: str, pid: int, at: float, now: float) -> None:
        self.started, self.started_at = now, at
        self.node, self.host, self.pid = node, host, pid

    def expired(self, now: float, timeout_s: float) -> bool:
        return self.started is not None and now - self.started > timeout_s

    def ran_for(self, now: float) -> float:
        return now - (self.started if self.started is not None else self.submitted)

    def stamp(self, record: Record) -> Record:
        """Stamp submission and collection times beside the worker's own start and
        finish, so the scheduling overhead of every cell can be read off its record."""
        if record.worker is None:
            return record
        stamps = {"submitted_at": self.submitted_at, "collected_at": time.time()}
        return record.with_changes(worker={**record.worker, **stamps})

    def whereabouts(self) -> dict[str, object]:
        """What the driver knows of where and when the cell ran, for a record it writes."""
        return {
            "node": self.node,
            "host": self.host,
            "pid": self.pid,
            "submitted_at": self.submitted_at,
            "started_at": self.started_at,
            "collected_at": time.time(),
        }


def no_run(task: CellTask, status: Status, reason: str, flight: InFlight | None = None) -> Record:
    """A record the driver writes for a cell that returned none; with what it knows of
    where and when the cell ran, where it was submitted."""
    record = Record.without_run(task.cell, task.run_id, status=status, reason=reason)
    record = record.with_changes(attempt=task.attempt)
    if flight is None:
        return record
    duration = flight.ran_for(time.perf_counter())
    return record.with_changes(duration_s=duration, worker=flight.whereabouts())


# (flight id, node id, host, pid, the worker's wall clock)
Start = tuple[int, str, str, int, float]


class StartBoard:
    """Where each task says that it started running, on which node and in which process
    (a Ray actor in `harness.dispatch`). The driver drains it every poll: a cell's timeout
    clock starts then (a task still in Ray's queue is not running out of time), and a
    failed cell's node is known."""

    def __init__(self) -> None:
        self._starts: list[Start] = []

    def started(self, start: Start) -> None:
        self._starts.append(start)

    def drain(self) -> list[Start]:
        starts, self._starts = self._starts, []
        return starts


class Evidence(StrEnum):
    """What a dead task says about its node."""

    NODE = "node"  # Ray says the node died (NodeDiedError, "node ... is dead or unavailable")
    WORKER = "worker"  # only the worker died: a crash of the cell, or its node going down


class Verdict(StrEnum):
    RETRY = "retry"  # the node was lost: run the cell again elsewhere
    CRASHED = "crashed"  # the cell crashed on a live node: that is its record
    WAIT = "wait"  # the node's state has not settled yet


@dataclass
class Suspect:
    """A cell whose task died, held until its node's state says whose fault it was."""

    flight: InFlight
    crashed: Record  # its record if the node turns out alive
    evidence: Evidence
    node: str | None  # where it ran: its start report, else Ray's error message
    since: float  # the driver's clock when the error arrived


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
    return Verdict.RETRY if suspect.evidence is Evidence.NODE else Verdict.CRASHED


_NODE_ID = re.compile(r"node ID: ([0-9a-f]{16,})")


def node_in_message(message: str) -> str | None:
    """The node ID Ray names in a node-death message ("... node ID: 0ac1bf...")."""
    found = _NODE_ID.search(message)
    return found.group(1) if found else None


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
    # Each zygote's first export per exporter (harness.cell.warmup), from every record
    # collected.
    cold_starts: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    def note_cold_start(self, record: Record) -> None:
        worker = record.worker or {}
        if cold := worker.get("cold_start"):
            where = {
                "node": worker.get("node"),
                "pid": worker.get("pid"),  # the Ray worker's
                "zygote_pid": worker.get("zygote_pid"),
                "variant": record.variant,
            }
            self.cold_starts.append({**cold, **where})

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


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def auth_hint() -> str:
    if os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        "; if it runs and was started with `ray start` (Ray >= 2.59), it wants token"
        " authentication: set RAY_AUTH_MODE=token here too, with its token in RAY_AUTH_TOKEN"
        " or ~/.ray/auth_token"
    )


# Ray's own default options of the pip it runs, which `pip_install_options` replaces.
RAY_PIP_OPTIONS = ("--disable-pip-version-check", "--no-cache-dir")


def runtime_env(pip_specs: tuple[str, ...]) -> dict[str, Any] | None:
    """A variant's packages as Ray's pip runtime_env; entries starting with `-` are options
    of that pip (`--no-index`, `--find-links=DIR`, `--index-url=URL`, `--pre`)."""
    packages = [s for s in pip_specs if not s.startswith("-")]
    if not packages:
        return None
    options = [s for s in pip_specs if s.startswith("-")]
    if not options:
        return {"pip": packages}
    return {"pip": {"packages": packages, "pip_install_options": [*RAY_PIP_OPTIONS, *options]}}
