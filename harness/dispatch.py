"""Dispatch: cells as Ray tasks, records back in completion order. The only module that
imports ray (ruff's banned-api keeps it so); what it decides lives in `harness.scheduling`.

One task per cell, defined once at module level; each receives a small `CellTask` and
returns a `Record`. Each task runs its cell in a process of its own, forked from the
worker's zygote (harness.cell.isolation), which also enforces the cell's timeout and turns
its crashes into records. The driver submits a cell while a slot of its resources is free
(CPU slots, and GPUs for CUDA cells), processes results with `ray.wait` in completion
order, kills a task still running `ISOLATION_GRACE_S` past its timeout (counted from when
it reports that it runs, to a `StartBoard` actor), records a dead worker as `crashed`, and
runs a cell whose node died again elsewhere. It holds only the cells in flight and
waiting."""

from __future__ import annotations

import math
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import ray
from ray import exceptions as ray_errors
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from harness.cell.limits import crash_log_path, read_crash_log
from harness.errors import UsageError
from harness.scheduling import (
    GPU,
    MAX_ATTEMPTS,
    NODE_SETTLE_S,
    Backlog,
    ClusterInfo,
    DispatchStats,
    Evidence,
    InFlight,
    Slots,
    Start,
    StartBoard,
    Suspect,
    Verdict,
    auth_hint,
    first_line,
    judge,
    kind,
    no_run,
    node_in_message,
    runtime_env,
)
from harness.store.paired import PairResult, PairTask
from harness.store.records import CellTask, Record
from harness.store.status import Status

POLL_S = 0.5
CLUSTER_REFRESH_S = 5.0  # nodes join and die mid-run: the slots follow
START_REPORT_S = 30.0
DRAIN_S = 5.0
# The cell's own process is killed at its timeout by the zygote; the driver kills the task
# itself only this much later: time for a new worker's zygote to start and prepare (imports,
# the exporter's warm-up: ~15 s here, more on a loaded machine) before it forks the cell.
ISOLATION_GRACE_S = 120.0
HEAD = "node:__internal_head__"  # the resource Ray gives the head node
# Keep the object store small: records are a few KiB, and the default (30% of RAM)
# reserves shared memory the cells need.
OBJECT_STORE_BYTES = 256 * 1024 * 1024


def start(address: str | None, *, env_vars: dict[str, str] | None = None) -> ClusterInfo:
    """Join `address` (auto, HOST:PORT, ray://HOST:PORT) or start a local Ray instance."""
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": "ERROR",
        "runtime_env": {"env_vars": env_vars} if env_vars else None,
        "configure_logging": True,
    }
    if address:
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, ray_errors.RayError, ValueError) as exc:
            raise UsageError(
                f"--address {address}: cannot join the Ray cluster ({first_line(exc)}){auth_hint()}"
            ) from None
    else:
        # "local": a new instance even where `ray start` left a cluster running on this
        # machine (ray.init() would join that one, and refuse num_cpus).
        ray.init(
            address="local",
            num_cpus=os.cpu_count() or 1,
            object_store_memory=OBJECT_STORE_BYTES,
            **kwargs,
        )
    return cluster_info(address or "local")


def cluster_info(address: str) -> ClusterInfo:
    return ClusterInfo.of_ray(address, ray.nodes(), ray.cluster_resources())


def stop() -> None:
    """Shut Ray down; a local instance started here also loses its runtime_env folder (a
    variant's pip environment clones this virtualenv, ~2 GB each). Its logs stay."""
    node = getattr(ray._private.worker, "_global_node", None)  # a head only when started here
    owned = node.get_runtime_env_dir_path() if node is not None and node.is_head() else None
    if ray.is_initialized():
        ray.shutdown()
    if owned:
        shutil.rmtree(owned, ignore_errors=True)


_start_board = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(StartBoard)


def _board() -> Any:
    """The start board, on the head node where one is marked (it lives as long as the
    cluster does); Ray restarts it elsewhere if its node dies."""
    heads = [n["NodeID"] for n in ray.nodes() if n.get("Alive") and HEAD in n.get("Resources", {})]
    here = heads[0] if heads else ray.get_runtime_context().get_node_id()
    affinity = NodeAffinitySchedulingStrategy(here, soft=True)
    return _start_board.options(scheduling_strategy=affinity).remote()


def _run_cell_here(task: CellTask, board: Any = None, flight_id: int = 0) -> Record:
    started = time.time()
    if board is not None:
        _report_start(board, (flight_id, *_whoami().values(), started))
    from harness.cell.isolation import run_cell_isolated

    record = run_cell_isolated(task)
    worker = {
        **(record.worker or {}),  # what the zygote and the cell's process reported
        **_whoami(),
        "started_at": started,
        "finished_at": time.time(),
    }
    return record.with_changes(worker=worker)


def _report_start(board: Any, start: Start) -> None:
    """Synchronous, so the driver knows where the cell runs before it can crash there. A
    board that does not answer costs the cell nothing: the driver then falls back to
    timing the cell from its submission."""
    try:
        ray.get(board.started.remote(start), timeout=START_REPORT_S)
    except ray_errors.RayError:
        pass


# One task definition per kind of worker, at module level. CPU cells reuse worker processes
# and their zygotes (imports and warm-up paid once); each cell runs in a child forked from
# the zygote. A CUDA cell gets a worker of its own (max_calls=1), as Ray's docs advise.
_run_cell_remote = ray.remote(max_retries=0)(_run_cell_here)
_run_cell_remote_gpu = ray.remote(num_gpus=1, max_calls=1, max_retries=0)(_run_cell_here)


@ray.remote(max_retries=0)
def _versions_remote(distributions: tuple[str, ...] = ()) -> dict[str, Any]:
    from harness.store.environment import distribution_status, versions

    found: dict[str, Any] = dict(versions())
    if distributions:
        found["distributions"] = distribution_status(distributions)
    return found


def _whoami() -> dict[str, Any]:
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def variant_versions(
    variants: dict[str, tuple[str, ...]], *, distributions: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """Package versions as a worker of each variant's runtime_env sees them; with
    `distributions`, also theirs and whether they import (`harness bisect`)."""
    refs = {
        name: _versions_remote.options(runtime_env=runtime_env(specs)).remote(distributions)
        for name, specs in variants.items()
    }
    found: dict[str, dict[str, Any]] = {}
    for name, ref in refs.items():
        try:
            found[name] = ray.get(ref)
        except ray_errors.RayError as exc:
            found[name] = {"error": first_line(exc)}
    return found


def _submit(
    task: CellTask, variants: dict[str, tuple[str, ...]], board: Any, flight_id: int
) -> Any:
    remote = _run_cell_remote_gpu if kind(task) == GPU else _run_cell_remote
    options: dict[str, Any] = {"num_cpus": task.threads}
    env = runtime_env(variants.get(task.cell.variant, ()))
    if env:
        options["runtime_env"] = env
    return remote.options(**options).remote(task, board, flight_id)


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
    driver = _Driver(tasks, on_record, timeout_s, threads, max_in_flight, variants or {}, settle_s)
    driver.run()
    return driver.stats


class _Driver:
    """The state of one `run_tasks` call: the cells waiting for a slot, in flight, and
    dead with their node's state not yet settled."""

    def __init__(
        self,
        tasks: Iterable[CellTask],
        on_record: Callable[[Record], None],
        timeout_s: float,
        threads: int,
        cap: int | None,
        variants: dict[str, tuple[str, ...]],
        settle_s: float,
    ) -> None:
        self.backlog, self.on_record, self.variants = Backlog(tasks), on_record, variants
        self.timeout_s, self.threads, self.cap, self.settle_s = timeout_s, threads, cap, settle_s
        self.in_flight: dict[Any, InFlight] = {}
        self.suspects: list[Suspect] = []
        self.flights = 0
        self.board: Any = _board()
        self.board_misses = 0
        self.drained = self.refreshed = -math.inf
        self.no_slot_since: dict[str, float] = {}
        self.stats = DispatchStats()
        self.refresh(force=True)
        self.stats.slots, self.stats.max_in_flight = self.slots, self.slots.cpu

    def run(self) -> None:
        while self.in_flight or self.suspects or self.backlog:
            self.refresh()
            self.fill()
            self.wait()
            self.read_starts()
            self.settle()
            self.expire()
            self.drop_unrunnable()

    # -- the cluster and its slots -------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Which nodes are alive, and the slots they give (nodes join and die mid-run)."""
        now = time.perf_counter()
        if not force and now - self.refreshed < CLUSTER_REFRESH_S:
            return
        self.refreshed = now
        nodes = ray.nodes()
        self.alive = {n["NodeID"]: bool(n.get("Alive")) for n in nodes}
        resources = [n.get("Resources", {}) for n in nodes if n.get("Alive")]
        self.slots = Slots.of_nodes(resources, self.threads).capped(self.cap)

    def fill(self) -> None:
        while True:
            running, running_gpu = len(self.in_flight), self._running_gpu()
            task = self.backlog.next_fitting(self.slots, running=running, running_gpu=running_gpu)
            if task is None:
                return
            self.flights += 1
            flight = InFlight(task, self.flights)
            ref = _submit(task, self.variants, self.board, flight.flight_id)
            if self.board is None:  # no start reports: time the cell from its submission
                flight.started = flight.submitted
            self.in_flight[ref] = flight
            self.stats.submitted += 1
            self.stats.peak_in_flight = max(self.stats.peak_in_flight, len(self.in_flight))
            self.stats.peak_in_flight_gpu = max(self.stats.peak_in_flight_gpu, self._running_gpu())

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

    def collect(self, ref: Any, flight: InFlight) -> None:
        self.stats.completed += 1
        try:
            record: Record = ray.get(ref)
        except ray_errors.RayError as exc:
            self.failed(flight, exc)
            return
        self.stats.note_cold_start(record)
        self._final(flight.stamp(record))

    def failed(self, flight: InFlight, exc: ray_errors.RayError) -> None:
        """A task that returned no record. Where its worker or node died, the node's state
        decides (`settle`), except for a crash that is plainly the cell's own: one on the
        driver's node (which is alive: the driver runs), or one whose faulthandler log
        names its fatal signal (a killed node's workers die without one)."""
        task = flight.task
        self.read_starts(force=True, collected=flight)  # where it ran, if it reported its start
        last_words = read_crash_log(crash_log_path(task.run_dir, task.cell.cell_id))
        record = _failure_record(flight, exc, last_words)
        evidence = _evidence(exc)
        node = flight.node or node_in_message(str(exc))
        # On a one-node cluster (a local run) the node is the driver's, and alive.
        lone = list(self.alive) == [node]
        own_crash = evidence is Evidence.WORKER and (lone or last_words is not None)
        if evidence is None or own_crash:
            self._final(record)
            return
        self.suspects.append(Suspect(flight, record, evidence, node, time.perf_counter()))

    def settle(self) -> None:
        """Decide the dead tasks whose node's state has settled (see `judge`)."""
        if not self.suspects:
            return
        self.refresh(force=True)
        now, undecided = time.perf_counter(), []
        for suspect in self.suspects:
            alive = self.alive.get(suspect.node) if suspect.node else None
            verdict = judge(suspect, node_alive=alive, now=now, settle_s=self.settle_s)
            if verdict is Verdict.WAIT:
                undecided.append(suspect)
                continue
            self.stats.settle_waits_s.append(now - suspect.since)
            if verdict is Verdict.RETRY:
                self._retry(suspect)
            else:
                self._final(suspect.crashed)
        self.suspects = undecided

    def _retry(self, suspect: Suspect) -> None:
        task = suspect.flight.task
        if suspect.node:
            self.stats.lost_nodes.add(suspect.node)
        if task.attempt >= MAX_ATTEMPTS:
            reason = f"its node died or vanished in each of {MAX_ATTEMPTS} attempts"
            self._final(no_run(task, Status.CRASHED, reason, suspect.flight))
            return
        self.stats.retried += 1
        self.backlog.again(replace(task, attempt=task.attempt + 1))

    def _final(self, record: Record) -> None:
        self.stats.crashes += record.status is Status.CRASHED
        self.stats.timeouts += record.status is Status.TIMEOUT
        self.on_record(record)

    # -- clocks --------------------------------------------------------------------------

    def read_starts(self, *, force: bool = False, collected: InFlight | None = None) -> None:
        """Start each cell's clock when its task reports that it runs (every POLL_S); a
        `collected` flight, no longer in flight, learns where it ran."""
        now = time.perf_counter()
        if self.board is None or (not force and now - self.drained < POLL_S):
            return
        self.drained = now
        flights = [*self.in_flight.values(), *([collected] if collected else [])]
        try:
            starts: list[Start] = ray.get(self.board.drain.remote(), timeout=DRAIN_S)
        except ray_errors.RayError:
            # Unreachable (Ray restarts it): reports may be lost, so the cells not known to
            # run are taken to run from now, where is unknown; after 3 misses, no board.
            self.board_misses += 1
            self.board = None if self.board_misses >= 3 else self.board
            for flight in flights:
                flight.started = now if flight.started is None else flight.started
            return
        self.board_misses = 0
        by_id = {f.flight_id: f for f in flights}
        for flight_id, node, host, pid, at in starts:
            if flight_id in by_id:
                by_id[flight_id].start(node=node, host=host, pid=pid, at=at, now=now)

    def expire(self) -> None:
        """The driver's backstop, counted from the cell's start: a task with no result
        `ISOLATION_GRACE_S` past the cell's timeout (its zygote, which kills the cell's
        process at the timeout, is stuck) has its worker killed."""
        now, limit = time.perf_counter(), self.timeout_s + ISOLATION_GRACE_S
        for ref, flight in list(self.in_flight.items()):
            if flight.expired(now, limit):
                ray.cancel(ref, force=True)
                del self.in_flight[ref]
                self.stats.completed += 1
                reason = f"no result after {limit:g} s; worker killed"
                self._final(no_run(flight.task, Status.TIMEOUT, reason, flight))

    def drop_unrunnable(self) -> None:
        """Cells no alive node can run (their nodes died, and none with their resources
        is left) are recorded `not_attempted` once that has lasted `settle_s`, rather
        than waiting in a queue forever."""
        now = time.perf_counter()
        for k, queue in self.backlog.held.items():
            queued = [r for r, f in self.in_flight.items() if kind(f.task) == k and not f.started]
            if self.slots.of(k) > 0 or not (queue or queued):
                self.no_slot_since.pop(k, None)
                continue
            if now - self.no_slot_since.setdefault(k, now) < self.settle_s:
                continue
            need = f"{self.threads} CPUs" + (" and 1 GPU" if k == GPU else "")
            reason = f"no alive node of the Ray cluster can run it (it needs {need})"
            for ref in queued:
                ray.cancel(ref, force=True)
                self._not_attempted(self.in_flight.pop(ref).task, reason)
            while queue:
                self._not_attempted(queue.popleft(), reason)

    def _not_attempted(self, task: CellTask, reason: str) -> None:
        self.stats.not_attempted += 1
        self.on_record(no_run(task, Status.NOT_ATTEMPTED, reason))


def _evidence(exc: ray_errors.RayError) -> Evidence | None:
    """What a task's error says about its node: Ray's node-death errors and messages, or
    a dead worker (whose node may be dying: Ray reports the worker first)."""
    if isinstance(exc, _NODE_DEATHS):
        return Evidence.NODE
    if not isinstance(exc, ray_errors.RayTaskError) and NODE_DEATH_TEXT in str(exc):
        return Evidence.NODE
    if isinstance(exc, ray_errors.WorkerCrashedError | ray_errors.RaySystemError):
        return Evidence.WORKER
    return None


_NODE_DEATHS = (
    ray_errors.NodeDiedError,
    ray_errors.LocalRayletDiedError,
    ray_errors.ObjectLostError,
)
# Ray's message for a task whose node died (NodeDiedError, raised by the task's owner).
NODE_DEATH_TEXT = "node it was running on is dead or unavailable"


def _failure_record(flight: InFlight, exc: ray_errors.RayError, last_words: str | None) -> Record:
    task = flight.task
    if isinstance(
        exc,
        ray_errors.WorkerCrashedError | ray_errors.LocalRayletDiedError | ray_errors.NodeDiedError,
    ):
        reason = f"worker process died while running the cell: {last_words or first_line(exc)}"
        return no_run(task, Status.CRASHED, reason, flight)
    if isinstance(exc, ray_errors.OutOfMemoryError):
        reason = f"killed by Ray's memory monitor: {first_line(exc)}"
        return no_run(task, Status.OOM, reason, flight)
    if isinstance(exc, ray_errors.RayTaskError):
        return no_run(task, Status.HARNESS_ERROR, f"task raised: {first_line(exc)}", flight)
    return no_run(task, Status.CRASHED, f"{type(exc).__name__}: {first_line(exc)}", flight)


# -- paired re-measurement (harness compare) --------------------------------------------------


@ray.remote(max_retries=0)
def _time_pair_remote(task: PairTask) -> PairResult:
    from harness.cell.paired import time_pair

    return time_pair(task)


def time_pairs(tasks: Iterable[PairTask], on_result: Callable[[PairResult], None]) -> None:
    """Time each cell's two graphs together in one Ray task on its reserved cores
    (`num_cpus` = the task's threads, so two never share cores), results in completion
    order; a task that dies is a result with its error."""
    refs = {_time_pair_remote.options(num_cpus=t.threads).remote(t): t for t in tasks}
    while refs:
        (ready,), _ = ray.wait(list(refs), num_returns=1)
        task = refs.pop(ready)
        try:
            on_result(ray.get(ready))
        except ray_errors.RayError as exc:
            on_result(PairResult(task.key, error=f"{type(exc).__name__}: {first_line(exc)}"))
