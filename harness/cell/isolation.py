"""A cell run in a process that ran no other cell (a failure from a reused worker, run
again: see `harness.scheduling.needs_clean_rerun`), forked from a zygote.

A freshly spawned process pays about 8 s before its cell starts: imports (torch, onnx,
onnxruntime, onnxscript and the harness, ~4 s), the exporter's first export (~3.5 s for
dynamo) and the model's own imports (transformers, ~2 s). The zygote pays them once per
worker: a spawned process that imports, warms the exporter up at the cell's opset, imports
what the cell's model requires, and never runs a cell. Each isolated cell runs in a child
forked from it, so it starts in the state a new worker is in before its first cell.

torch runs on one thread in the zygote, so no OpenMP pool exists for the fork to break;
the child sets the cell's own thread count. Both processes die with their parent (a Ray
worker killed for a timeout takes its zygote and the hung cell with it).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import functools
import multiprocessing
import signal
import sys
from concurrent.futures.process import BrokenProcessPool

from harness.cell import limits
from harness.store.records import CellTask, Record
from harness.store.status import Status

_PR_SET_PDEATHSIG = 1


class _Zygote:
    """This worker's zygote, started on the first isolated cell."""

    pool: concurrent.futures.ProcessPoolExecutor | None = None


def run_cell_isolated(task: CellTask) -> Record:
    """`run_cell` in a child forked from this worker's zygote. A zygote that died (only
    something outside can kill it: cells run in its children) is started again, once."""
    for _ in range(2):
        if _Zygote.pool is None:
            _Zygote.pool = _start_zygote()
        try:
            return _Zygote.pool.submit(_fork_and_run, task).result()
        except BrokenProcessPool as exc:
            _Zygote.pool = None
            lost = exc
    return _crashed(task, f"the zygote died twice: {lost}")


def _start_zygote() -> concurrent.futures.ProcessPoolExecutor:
    context = multiprocessing.get_context("spawn")
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=context, initializer=_become_zygote
    )


def _become_zygote() -> None:
    import torch

    die_with_parent()
    torch.set_num_threads(1)


def _fork_and_run(task: CellTask) -> Record:
    """In the zygote: prepare for the cell, then run it in a forked child."""
    from harness.cell.worker import run_cell

    _prepare(task.source, task.cell.model, task.cell.exporter, task.cell.opset)
    context = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=1, mp_context=context, initializer=die_with_parent
    ) as pool:
        try:
            return pool.submit(run_cell, task).result()
        except BrokenProcessPool as exc:
            log = limits.crash_log_path(task.run_dir, task.cell.cell_id)
            return _crashed(task, f"cell process died: {limits.read_crash_log(log) or exc}")


@functools.cache
def _prepare(source: str, model: str, exporter: str, opset: int) -> None:
    """Everything the zygote can pay once for a cell: the exporter's cold start (measured
    and dropped: a record carries the cold start of the worker process that ran it, and a
    forked child has none of its own), its warm-up at the opset, and the modules the
    model requires."""
    from harness.cell.warmup import measure_cold_start, take_cold_start, warm_up_exporter
    from harness.cell.worker import find_spec

    measure_cold_start(exporter)
    take_cold_start(exporter)
    warm_up_exporter(exporter, opset)
    try:
        find_spec(source, model).missing_requirement()  # imports them; the child reports
    except Exception:  # the child meets and records the same problem
        pass


def die_with_parent() -> None:
    """Have Linux kill this process when the process that started it dies."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _crashed(task: CellTask, reason: str) -> Record:
    record = Record.without_run(task.cell, task.run_id, status=Status.CRASHED, reason=reason)
    return record.with_changes(attempt=task.attempt)
