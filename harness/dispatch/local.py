"""The local runner: dispatch's `Tasks` on this machine, without Ray (`harness run --local`).

The same driver loop (`harness.dispatch.loop`) and the same isolation as a Ray run: each
slot of the machine (`--threads` CPUs, and a GPU for a CUDA cell) has zygotes of its own
(`harness.runtime.zygote.Zygotes`), and each cell runs in a child forked from one, with its
timeout, memory ceiling and crash handling. What Ray alone gives is absent: other nodes,
`--variant`'s runtime environments and node loss. For a laptop, or a CI job where starting
Ray costs more than the run; the tests drive every run-directory command through it."""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from queue import SimpleQueue

from harness.dispatch.cluster import ClusterInfo, Runner, VersionProbe
from harness.dispatch.flight import Start
from harness.dispatch.loop import Driver
from harness.dispatch.policy import GPU, DispatchStats, Failure, Options, RayNode, TaskFailure, kind
from harness.plan.memory import pair_need_gb
from harness.runtime import kept
from harness.runtime.zygote import Zygotes
from harness.store.details import WorkerInfo
from harness.store.error_text import first_line
from harness.store.paired import PairResult, PairTask
from harness.store.records import CellTask, Record

NODE = "local"  # the one node's id, as records and the manifest name it
ADDRESS = "local (in-process, no Ray)"

Ref = concurrent.futures.Future[Record]
_MEMORY: dict[float, _Reservations] = {}  # by capacity: `machine_memory`


def _cell_threads(workers: int, *, kept_here: bool) -> concurrent.futures.ThreadPoolExecutor:
    """The threads a run's cells run on: its own, one per slot (one in all where the process
    runs its cells one at a time: `kept.one_at_a_time`), or, where zygotes are kept, the
    process's one kept thread (`kept.thread`)."""
    if kept_here:
        return kept.thread()
    workers = 1 if kept.one_at_a_time() else workers
    return concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="cell")


def runner() -> Runner:
    """This machine, as the pipeline runs on it without Ray."""
    node = this_node()
    cluster = ClusterInfo.of_ray(ADDRESS, [node], node["Resources"])
    return Runner(cluster, _dispatch, _versions, lambda nodes: {NODE: dict(_here())}, time_pairs)


def this_node() -> RayNode:
    """This machine as the one node of a cluster: its CPUs, GPUs and memory."""
    from harness.store.environment import MEMORY_SHARE, hardware

    found = hardware()
    resources = {"CPU": float(os.cpu_count() or 1), "GPU": float(len(found["gpus"]))}
    if found["memory_gb"]:  # what cells may reserve: the machine, less room for the rest
        resources["memory"] = float(found["memory_gb"] * MEMORY_SHARE * 1024**3)
    host = socket.gethostname()
    return {
        "NodeID": NODE,
        "Alive": True,
        "Resources": resources,
        "NodeManagerHostname": host,
        "NodeManagerAddress": "127.0.0.1",
    }


def _here() -> VersionProbe:
    from harness.store.environment import versions

    return dict(versions())


def _versions(
    variants: dict[str, tuple[str, ...]], distributions: tuple[str, ...]
) -> dict[str, VersionProbe]:
    """The base environment's package versions (with `distributions`' status): the only
    environment a local run has (`--variant` needs Ray's runtime environments)."""
    from harness.store.environment import distribution_status

    found = _here()
    if distributions:
        found["distributions"] = distribution_status(distributions)
    return {name: found for name in variants if name == "base"}


def run_tasks(
    tasks: Iterable[CellTask],
    on_record: Callable[[Record], None],
    *,
    timeout_s: float,
    threads: int = 1,
    max_in_flight: int | None = None,
) -> DispatchStats:
    """Run every task on this machine, each record handed to `on_record` as it arrives:
    `harness.dispatch.driver.run_tasks` without Ray."""
    return _dispatch(tasks, on_record, Options(timeout_s, threads, max_in_flight))


def _dispatch(
    tasks: Iterable[CellTask], on_record: Callable[[Record], None], options: Options
) -> DispatchStats:
    local = LocalTasks()
    try:
        driver = Driver(tasks, on_record, options, local)
        driver.run()
    finally:
        local.close()
    return driver.stats


class LocalTasks:
    """`loop.Tasks` on this machine: a thread per running cell, each borrowing a slot's
    zygotes (at most as many sets as cells ran at once) and, for a CUDA cell, a GPU."""

    def __init__(self, node: RayNode | None = None) -> None:
        self.node = node or this_node()
        resources = self.node["Resources"]
        self.kept_key = kept.key()
        self.pool = _cell_threads(
            max(1, int(resources["CPU"])), kept_here=self.kept_key is not None
        )
        self.submitted: list[Ref] = []
        self.idle: SimpleQueue[Zygotes] = SimpleQueue()
        self.gpus: SimpleQueue[str] = SimpleQueue()
        for index in range(int(resources.get("GPU", 0))):
            self.gpus.put(str(index))
        self.seats: dict[Ref, _Seat] = {}
        self.memory = machine_memory(resources.get("memory", 0.0) / 1024**3)
        self.starts: list[Start] = []
        self.lock = threading.Lock()
        self.every: list[Zygotes] = []

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def nodes(self) -> list[RayNode]:
        return [self.node]

    def submit(self, task: CellTask, flight_id: int, *, report_start: bool) -> Ref:
        seat = _Seat()
        ref: Ref = self.pool.submit(self._run, task, flight_id, report_start, seat)
        self.submitted.append(ref)
        self.seats[ref] = seat
        return ref

    def _run(self, task: CellTask, flight_id: int, report_start: bool, seat: _Seat) -> Record:
        with self.memory.reserved(task.memory_gb or 0.0):  # its clock starts once it fits
            return self._run_reserved(task, flight_id, report_start, seat)

    def _run_reserved(
        self, task: CellTask, flight_id: int, report_start: bool, seat: _Seat
    ) -> Record:
        zygotes = seat.take(self._borrow(task.run_id))
        started = time.time()
        here = WorkerInfo(node=NODE, host=self.node.get("NodeManagerHostname"), pid=os.getpid())
        if report_start:
            with self.lock:
                self.starts.append((flight_id, NODE, here.host or "", here.pid or 0, started))
        gpu = self.gpus.get() if kind(task) == GPU else None
        try:
            record = zygotes.run(task, gpu if gpu is not None else "")
        finally:
            if gpu is not None:
                self.gpus.put(gpu)
            self.idle.put(zygotes if not zygotes.stopped else self._fresh(task.run_id))
        reported = record.worker or WorkerInfo()
        where = replace(here, started_at=started, finished_at=time.time())
        return record.with_changes(worker=reported.with_facts(where))

    def _borrow(self, run_id: str) -> Zygotes:
        if self.idle.empty():
            return self._fresh(run_id)
        return self.idle.get()

    def _fresh(self, run_id: str) -> Zygotes:
        """A slot's zygotes; what they and their cells print goes to a log of their own,
        as a Ray worker's does (`logs_of(run_id)`)."""
        with self.lock:
            log = logs_of(run_id) / f"zygote-{len(self.every) + 1}.log"
            zygotes = kept.take(self.kept_key) or Zygotes()
            zygotes.log = log
            self.every.append(zygotes)
        return zygotes

    def wait(self, refs: Sequence[Ref], timeout_s: float) -> list[Ref]:
        done, _ = concurrent.futures.wait(
            refs, timeout=timeout_s, return_when=concurrent.futures.FIRST_COMPLETED
        )
        return list(done)

    def result(self, ref: Ref) -> Record | TaskFailure:
        self.seats.pop(ref, None)
        if ref.cancelled():
            return TaskFailure(Failure.OTHER, "the cell was cancelled before it started")
        error = ref.exception()
        if error is not None:  # the harness's own code raised around the cell's child
            return TaskFailure(Failure.RAISED, first_line(error))  # the policy says "task raised"
        return ref.result()

    def cancel(self, ref: Ref) -> None:
        """A cell not started yet never starts; a running one's zygotes are killed, and
        its cell with them."""
        seat = self.seats.pop(ref, None)
        if not ref.cancel() and seat is not None:
            seat.stop()

    def drain_starts(self) -> list[Start] | None:
        with self.lock:
            starts, self.starts = self.starts, []
        return starts

    def close(self) -> None:
        """Stop what still runs (an interrupted run), shut the rest down."""
        for seat in self.seats.values():
            seat.stop()
        if self.kept_key is None:
            self.pool.shutdown(wait=True, cancel_futures=True)
        else:  # the threads stay with the zygotes they started (harness.runtime.kept)
            for ref in self.submitted:
                ref.cancel()
            concurrent.futures.wait(self.submitted)
        with self.lock:
            every = list(self.every)
        for zygotes in every:
            kept.release(self.kept_key, zygotes)
        self.every.clear()
        if self.kept_key is None:  # shut down: their queues' semaphores are unlinked now,
            gc.collect()  # not reported leaked at exit


def logs_of(run_id: str) -> Path:
    """Where a local run's zygotes print (a cell's output, a crash's last words)."""
    return Path(tempfile.gettempdir()) / "harness-local" / run_id


def machine_memory(capacity_gb: float | None = None) -> _Reservations:
    """This machine's memory as a local run's cells and exporter pairs reserve it (of
    `capacity_gb`: the machine's share, `this_node`), one account a process: a pair waits
    for the cells' memory, as a cell does for another's."""
    if capacity_gb is None:
        capacity_gb = this_node()["Resources"].get("memory", 0.0) / 1024**3
    return _MEMORY.setdefault(capacity_gb, _Reservations(capacity_gb))


class _Reservations:
    """The machine's memory as cells reserve it (their `memory_gb`): a cell waits until
    what it needs is free, as Ray holds a task whose `memory` no node has free. One that
    needs more than the whole (never dispatched: the pipeline skips it) runs alone."""

    def __init__(self, capacity_gb: float) -> None:
        self.capacity = capacity_gb
        self.used = 0.0
        self.free = threading.Condition()

    @contextlib.contextmanager
    def reserved(self, gb: float) -> Iterator[None]:
        if not gb or not self.capacity:
            yield
            return
        with self.free:
            self.free.wait_for(lambda: self.used == 0 or self.used + gb <= self.capacity)
            self.used += gb
        try:
            yield
        finally:
            with self.free:
                self.used -= gb
                self.free.notify_all()


class _Seat:
    """The zygotes a submitted cell runs in, once its thread has them; a cell cancelled
    before that is stopped as soon as it takes them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.zygotes: Zygotes | None = None
        self.cancelled = False

    def take(self, zygotes: Zygotes) -> Zygotes:
        with self.lock:
            self.zygotes = zygotes
            if self.cancelled:
                zygotes.stop()
        return zygotes

    def stop(self) -> None:
        with self.lock:
            self.cancelled = True
            if self.zygotes is not None:
                self.zygotes.stop()


# -- paired re-measurement (harness compare --local) --------------------------------------------


def time_pairs(tasks: Iterable[PairTask], on_result: Callable[[PairResult], None]) -> None:
    """Time each cell's two graphs together, one process at a time per slot of the task's
    threads, each once the machine's memory holds its need beside the cells' (as Ray places
    a pair), results in completion order; a process that dies is a result with its error."""
    import multiprocessing

    tasks = list(tasks)
    if not tasks:
        return
    threads = max(t.threads for t in tasks)
    workers = max(1, (os.cpu_count() or 1) // threads)
    memory = machine_memory()
    context = multiprocessing.get_context("spawn")
    with (
        concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool,
        concurrent.futures.ThreadPoolExecutor(workers) as seats,
    ):

        def reserved(task: PairTask) -> PairResult:
            with memory.reserved(pair_need_gb(task)):
                return pool.submit(_time_pair, task).result()

        futures = {seats.submit(reserved, t): t for t in tasks}
        for future in concurrent.futures.as_completed(futures):
            try:
                on_result(future.result())
            except Exception as exc:
                on_result(PairResult(futures[future].key, error=first_line(exc)))


def _time_pair(task: PairTask) -> PairResult:
    from harness.cell.paired import time_pair

    return time_pair(task)
