"""Every cell in a process of its own, forked from its worker's zygote: each cell runs as
if alone.

A cell can change what its process holds: patch a torch function, wrap
`torch.onnx.export`, set the default dtype or flush-denormal, change `os.environ`,
`sys.modules`, the warnings filters or the recursion limit, register a TorchScript
symbolic. In a process reused by the next cell, that state silently changes the next
cell's graph and verdict (seen here: a patched `F.gelu` put `Tanh` where `Erf` belongs in
the next model's graph, and its record still said `ok`). So no cell runs in a reused
process: each runs in a child that takes its state with it when it exits.

The zygote, one per worker process, is spawned (a fresh interpreter: nothing of the
worker's) and never runs a cell. Before each cell it pays, once each, what any fresh
process would pay for it: the exporter's cold start (measured; the zygote's first record
of that exporter carries it), the exporter's warm-up at the cell's opset (which fills the
dynamo registry memo), and the imports of what the model requires (`ModelSpec.requires`:
transformers, the OpInfo database), then fills inspect's map from source file to module
for what is loaded, holding the node shared (never beside a cell timing alone: node.py).
It never executes a zoo file. It then sets what is alive aside (`gc.freeze`: a child's
collections leave the zygote's objects, and so their pages, alone) and forks.

The child sets the state every cell starts from (its process group, the seeds; `run_cell`
sets its threads and memory ceiling), runs `run_cell` (other work: holding the node shared,
as a cell does), sends the record through a pipe and leaves with `os._exit` (no exit handler
of the zygote runs). The zygote waits for it up to the cell's timeout (leaving off its
clock what the child waited for the node, up to as long again: node.WaitMeter): past that,
the child's process group is killed and the record is `timeout`; a child that dies is
`crashed` with its signal, or `oom` where the kernel's OOM killer took it. The worker and its zygote
go on. torch runs on one thread in the zygote, so no OpenMP pool exists for the fork to
break. The zygote dies with its worker, and the child with its zygote.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import importlib
import inspect
import multiprocessing
import os
import pickle
import random
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, NoReturn, TypeVar

from harness.cell import node
from harness.runtime import limits, scratch
from harness.runtime.exits import (
    LENGTH,
    ChildExit,
    end_group,
    no_record,
    oom_kills,
    own_group,
    wait_for,
)
from harness.store.details import ColdStart, WorkerInfo
from harness.store.records import CellTask, Record
from harness.store.status import Status
from harness.zoo.spec import SEED

_PR_SET_PDEATHSIG = 1
# A zygote never opens CUDA: a child cannot use a CUDA its parent initialised ("Cannot
# re-initialize CUDA in forked subprocess": on the first GPU run every cell failed so, CPU
# cells too, since the zygote's warm-up export had initialised it: torch._dynamo saves the
# CUDA RNG state wherever CUDA is available). So a zygote sees no GPU, and asks through
# NVML, which initialises nothing; each child gets its worker's view back, or its task's GPUs.
# Hiding the GPU is not enough for an export: torch caches the device count it first finds
# (zero, in C++, for the process and its forks; seen on the second GPU run), so CUDA cells
# fork from a zygote of their own that only imports, and pay their exporter's warm-up in
# the child, before the export they measure.
_ZYGOTE_CUDA_ENV = {"CUDA_VISIBLE_DEVICES": "", "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}

Given = TypeVar("Given")
Made = TypeVar("Made")


@dataclass(frozen=True)
class Work(Generic[Given, Made]):
    """Work on a cell other than running it (repro's minimizer, debt's search), done as a
    cell is run: `function(given)` in a child forked from a zygote that has paid the
    exporter's cold start and warm-up at the opset, seeded, under its memory ceiling,
    killed with what it started past `timeout_s`. `function` is module-level: it is
    pickled by name, `given` and what it returns by value."""

    function: Callable[[Given], Made]
    given: Given
    exporter: str
    opset: int
    timeout_s: float
    max_memory_gb: float | None = None


@dataclass(frozen=True)
class Done(Generic[Made]):
    """What a `Work` returned, or why it returned nothing (`failure`: it raised, crashed,
    ran out of memory or past its time)."""

    value: Made | None = None
    failure: str | None = None


class Zygotes:
    """A worker's zygotes, each started on its first cell: one for CPU cells and one for
    CUDA cells. A Ray worker process has one set (`run_cell_isolated`'s default); the
    local runner (`harness.dispatch.local`) one per slot. (The worker itself imports
    neither torch nor the measuring code: only the zygote and its children do.)"""

    def __init__(self, log: Path | None = None) -> None:
        self.pools: dict[str, concurrent.futures.ProcessPoolExecutor] = {}
        self.stopped = False
        self.log = log  # where the zygotes and their cells print; None: the worker's output

    def run(self, task: CellTask, gpus: str | None = None) -> Record:
        """`run_cell` in a child forked from the zygote of the cell's kind. A zygote that
        died (only something outside can kill it: cells run in its children) is started
        again, once, unless it was stopped on purpose (`stop`)."""
        which = "cuda" if task.cell.device == "cuda" else "cpu"
        try:
            return self._in_zygote(which, _fork_and_run, task, gpus, self.log)
        except _Stopped:
            return no_record(task, Status.CRASHED, "the cell was cancelled")
        except BrokenProcessPool as lost:
            return no_record(task, Status.CRASHED, f"the zygote died twice: {lost}")

    def call(self, work: Work[Given, Made]) -> Done[Made]:
        """`work` in a child forked from the CPU cells' zygote (`Work`)."""
        try:
            return self._in_zygote("cpu", _fork_and_call, work, self.log)
        except _Stopped:
            return Done(failure="cancelled")
        except BrokenProcessPool as lost:
            return Done(failure=f"the zygote died twice: {lost}")

    def _in_zygote(self, which: str, function: Callable[..., Made], *args: object) -> Made:
        for attempt in range(2):
            if self.stopped:
                raise _Stopped
            pool = self.pools.get(which) or _start_zygote(self.log)
            self.pools[which] = pool
            try:
                return pool.submit(function, *args).result()
            except BrokenProcessPool:
                del self.pools[which]
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def stop(self) -> None:
        """Kill the zygotes at once (a cell running in one dies with it: its child has
        `die_with_parent`)."""
        self.stopped = True
        for pool in list(self.pools.values()):
            for process in list(getattr(pool, "_processes", {}).values()):
                process.kill()
            pool.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Shut the zygotes down (their cells are done)."""
        for pool in self.pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
        self.pools.clear()


class _Stopped(Exception):
    """The zygotes were stopped on purpose (`Zygotes.stop`)."""


_WORKER = Zygotes()  # a Ray worker process's: it runs one cell at a time
# In a zygote: its worker's CUDA environment, which each child gets back (`_give_gpus`).
_WORKER_CUDA_ENV: dict[str, str | None] = {}


def run_cell_isolated(
    task: CellTask, gpus: str | None = None, zygotes: Zygotes | None = None
) -> Record:
    """`run_cell` in a child forked from a zygote of `zygotes` (this worker's by default).

    `gpus` is the `CUDA_VISIBLE_DEVICES` the scheduler gave this task (a CUDA cell's GPU):
    the child sets it before anything touches CUDA. The zygote's own environment is the
    one its worker had when it was spawned, for whichever task came first, so a child must
    not inherit it: it may name another task's GPU, or none."""
    return (zygotes or _WORKER).run(task, gpus)


def _start_zygote(log: Path | None) -> concurrent.futures.ProcessPoolExecutor:
    context = multiprocessing.get_context("spawn")
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=context, initializer=_become_zygote, initargs=(log,)
    )


def _become_zygote(log: Path | None = None) -> None:
    _print_to(log)
    scratch.sweep()
    _WORKER_CUDA_ENV.update({k: os.environ.get(k) for k in _ZYGOTE_CUDA_ENV})
    os.environ.update(_ZYGOTE_CUDA_ENV)
    import torch

    die_with_parent()
    torch.set_num_threads(1)
    _no_tqdm_process_lock()


def _print_to(log: Path | None) -> None:
    """What this process prints goes to `log` (None: where it goes now), as a Ray worker's
    goes to its log."""
    if log is None:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        for fd in (1, 2):
            os.dup2(out.fileno(), fd)


def _no_tqdm_process_lock() -> None:
    """tqdm (the dynamo exporter's optimizer shows progress with it) makes a
    multiprocessing lock on first use, a named semaphore that a zygote, which ends with
    `os._exit`, never unlinks: Python's resource tracker then warns of a leak at the end of
    every local run. No cell of a zygote shares tqdm across processes: a thread lock does."""
    try:
        from tqdm import std
    except ImportError:
        return
    std.TqdmDefaultWriteLock.mp_lock = None


# -- in the zygote ------------------------------------------------------------------------------


def _fork_and_run(task: CellTask, gpus: str | None = None, log: Path | None = None) -> Record:
    """Prepare what every process running this cell would pay for, then run the cell in a
    forked child (printing to `log`: a kept zygote's run's, not the one it started for)
    and return its record, with where and at what cost it ran."""
    from harness.cell.timing import freeze_survivors, rss_mb

    start = time.perf_counter()
    cold_start = None
    if task.cell.device != "cuda":  # a CUDA cell's child warms its exporter up itself
        cold_start = _prepared(task.cell.exporter, task.cell.opset, task.requires)
    freeze_survivors()
    facts = WorkerInfo(
        zygote_pid=os.getpid(),
        zygote_rss_mb=_rounded(rss_mb()),
        prepare_s=round(time.perf_counter() - start, 4),
        cold_start=cold_start,
    )
    body = functools.partial(_cell_body, task, time.perf_counter())
    child = _fork(body, task.timeout_s, task.max_memory_gb, gpus, log)
    record, child_facts = child.record(task)
    worker = record.worker or WorkerInfo()
    return record.with_changes(worker=worker.with_facts(facts).with_facts(child_facts))


def _fork_and_call(work: Work[Given, Made], log: Path | None = None) -> Done[Made]:
    """`Work` as a cell: prepared for as its exporter's cells are, in a forked child."""
    from harness.cell.timing import freeze_survivors

    _prepared(work.exporter, work.opset, ())
    freeze_survivors()
    started = time.perf_counter()
    body = functools.partial(_work_body, work)
    ended = _fork(body, work.timeout_s, work.max_memory_gb, None, log)
    sent = ended.sent_payload()
    if isinstance(sent, Done):
        return sent
    _, reason = ended.judged(work.timeout_s, last_words=None)
    return Done(failure=f"{reason} ({time.perf_counter() - started:.0f} s)")


def _prepared(exporter: str, opset: int, requires: tuple[str, ...]) -> ColdStart | None:
    """`_prepare`d; the exporter's cold start, where this zygote had one pending (its
    first cell of the exporter carries it)."""
    from harness.runtime.warmup import take_cold_start

    _prepare(exporter, opset, requires)
    return take_cold_start(exporter)  # the child has none pending


@functools.cache
def _prepare(exporter: str, opset: int, requires: tuple[str, ...]) -> None:
    """The exporter's cold start (measured once per exporter, before anything else is
    exported), its warm-up at the opset, and the modules the model requires. A module that
    does not import is the child's to meet and record (a skip)."""
    from harness.runtime.warmup import measure_cold_start, warm_up_exporter

    with node.holding(label="a zygote's warm-up"):  # never beside a cell timing alone
        measure_cold_start(exporter)
        warm_up_exporter(exporter, opset)
        for module in requires:
            with contextlib.suppress(BaseException):
                importlib.import_module(module)
    # inspect's map from source file to module, filled for every module loaded: a child that
    # asks inspect where a frame comes from (OpInfo's sample_inputs calls inspect.stack()
    # for every op) would resolve each loaded module's path again (0.04-0.13 s a cell).
    inspect.getmodule(compile("", "<zygote warm-up>", "exec"))


def _fork(
    body: Callable[[], bytes],
    timeout_s: float | None,
    max_memory_gb: float | None,
    gpus: str | None,
    log: Path | None = None,
) -> ChildExit:
    """`body` in a forked child, what it returns sent back through a pipe; the child
    watched against its memory ceiling and killed past `timeout_s`, its temporary files
    removed when it has ended (harness.runtime.scratch)."""
    read_fd, write_fd = os.pipe()
    oom_kills_before = oom_kills()
    zygote = os.getpid()
    waits = node.WaitMeter()
    with scratch.folder() as temp:
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            node.report_waits_to(waits)
            _child(body, write_fd, zygote, gpus, log, temp)
        os.close(write_fd)
        own_group(pid)
        try:
            watch = limits.CeilingWatch(pid, max_memory_gb) if max_memory_gb else None
            return wait_for(pid, read_fd, timeout_s, oom_kills_before, watch, waits)
        finally:
            os.close(read_fd)
            end_group(pid)  # what the cell started dies, before its folder goes


# -- in the child -------------------------------------------------------------------------------


def _child(
    body: Callable[[], bytes],
    fd: int,
    zygote: int,
    gpus: str | None,
    log: Path | None,
    temp: Path | None,
) -> NoReturn:
    """Run `body`, send what it returns, and leave: `os._exit`, so that none of the
    zygote's exit handlers runs here."""
    code = 0
    try:
        own_group(0)  # a timeout kills what the cell started, too
        die_with_parent()
        if os.getppid() != zygote:  # the zygote died before the line above took effect
            raise SystemExit(70)
        _print_to(log)
        _give_gpus(gpus)
        scratch.enter(temp)
        _send(fd, body())
    except BaseException:
        code = 70
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed or broken stream: nothing to flush
                stream.flush()
        os._exit(code)


def _cell_body(task: CellTask, forked_at: float) -> bytes:
    """The cell's record, with what its fork cost and its memory at the end."""
    started = time.perf_counter()
    from harness.cell.timing import private_memory_mb  # the zygote imported it: a lookup

    record = _run(task)
    memory = private_memory_mb()
    facts = WorkerInfo(
        fork_s=round(started - forked_at, 4),
        cell_pss_mb=memory.get("pss_mb"),
        cell_uss_mb=memory.get("uss_mb"),
    )
    return _encode(task, record, facts)


def _work_body(work: Work[Given, Made]) -> bytes:
    """`work`'s function, seeded and under its memory ceiling; what it raised is its
    failure."""
    seed_everything()
    try:
        with limits.memory_limit(work.max_memory_gb), node.holding():
            done = Done(value=work.function(work.given))
    except Exception as exc:
        done = Done(failure=f"{type(exc).__name__}: {exc}")
    return _framed((done, WorkerInfo(), time.perf_counter()))


def _give_gpus(gpus: str | None) -> None:
    """The child's view of the GPUs, before CUDA is first touched: `gpus` (as
    CUDA_VISIBLE_DEVICES names them: a CUDA cell's GPU, or "" for none) where the task
    says, else the worker's own."""
    worker = dict(_WORKER_CUDA_ENV)
    if gpus is not None:
        worker["CUDA_VISIBLE_DEVICES"] = gpus
    for name, value in worker.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _run(task: CellTask) -> Record:
    from harness.runtime.worker import run_cell

    seed_everything()
    try:
        return run_cell(task)
    except BaseException as exc:
        if limits.met_its_ceiling():  # what failed to allocate raised another error later
            reason = f"the cell ended its own process at its memory ceiling: {exc!r}"
            return no_record(task, Status.OOM, reason)
        reason = f"the cell ended its own process: {type(exc).__name__}: {exc}"
        return no_record(task, Status.CRASHED, reason)


def seed_everything(seed: int = SEED) -> None:
    """The seeds every cell starts from: torch, Python's and numpy's generators (the
    zygote's are whatever its start left them at)."""
    import numpy as np
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def _encode(task: CellTask, record: Record, facts: WorkerInfo) -> bytes:
    try:
        return _framed((record, facts, time.perf_counter()))
    except Exception as exc:  # e.g. an unpicklable value in the entry's metadata
        reason = f"the record cannot be sent back: {type(exc).__name__}: {exc}"
        return _framed((no_record(task, Status.HARNESS_ERROR, reason), facts, 0.0))


def _framed(message: tuple[object, WorkerInfo, float]) -> bytes:
    """A message as the zygote reads it (exits.wait_for): its length, then its pickle."""
    body = pickle.dumps(message)
    return LENGTH.pack(len(body)) + body


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- shared ---------------------------------------------------------------------------------------


def die_with_parent() -> None:
    """Have Linux kill this process when the process that started it dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
