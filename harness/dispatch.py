"""Dispatch: cells as Ray tasks, records back in completion order. The only module that
imports ray (ruff's banned-api keeps it so).

One task per cell, defined once at module level; each receives a small `CellTask` and
returns a `Record`. The driver bounds the tasks in flight to the slots the cluster has
(so a cell's clock starts when it can start), processes results with `ray.wait` in
completion order, enforces `--timeout` by cancelling with force, and turns a dead worker
into a `crashed` record. Nothing here holds more than the tasks in flight.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import ray
from ray import exceptions as ray_errors

from harness.cell.limits import crash_log_path, read_crash_log
from harness.errors import UsageError
from harness.store.records import CellTask, Record
from harness.store.status import Status

POLL_S = 0.5
# Keep the object store small: records are a few KiB, and the default (30% of RAM)
# reserves shared memory the cells need.
OBJECT_STORE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ClusterInfo:
    address: str
    nodes: list[dict[str, Any]]
    resources: dict[str, float]

    @property
    def has_gpus(self) -> bool:
        return self.resources.get("GPU", 0) > 0


def start(address: str | None, *, env_vars: dict[str, str] | None = None) -> ClusterInfo:
    """Join `address` (auto, HOST:PORT, ray://HOST:PORT) or start a local Ray instance."""
    runtime_env = {"env_vars": env_vars} if env_vars else None
    kwargs: dict[str, Any] = {
        "include_dashboard": False,
        "log_to_driver": False,
        "logging_level": "ERROR",
        "runtime_env": runtime_env,
        "configure_logging": True,
    }
    if address:
        try:
            ray.init(address=address, **kwargs)
        except (ConnectionError, ray_errors.RayError, ValueError) as exc:
            raise UsageError(
                f"--address {address}: cannot join the Ray cluster ({_first_line(exc)}){_auth_hint()}"
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


def _auth_hint() -> str:
    if os.environ.get("RAY_AUTH_MODE"):
        return ""
    return (
        "; if it runs and was started with `ray start` (Ray >= 2.59), it wants token"
        " authentication: set RAY_AUTH_MODE=token here too, with its token in RAY_AUTH_TOKEN"
        " or ~/.ray/auth_token"
    )


def cluster_info(address: str) -> ClusterInfo:
    nodes = [
        {
            "node_id": n["NodeID"],
            "host": n.get("NodeManagerHostname"),
            "address": n.get("NodeManagerAddress"),
            "alive": n.get("Alive"),
            "resources": {
                k: v for k, v in n.get("Resources", {}).items() if not k.startswith("node:")
            },
        }
        for n in ray.nodes()
    ]
    resources = {k: v for k, v in ray.cluster_resources().items() if not k.startswith("node:")}
    return ClusterInfo(address, nodes, resources)


def stop() -> None:
    if ray.is_initialized():
        ray.shutdown()


class _ThisProcess:
    """How many cells this worker process ran before the current one (a reused worker
    may carry state from them; see `_needs_clean_rerun`)."""

    cells_run = 0


def _run_cell_here(task: CellTask) -> Record:
    started = time.time()
    from harness.cell.worker import run_cell, run_cell_isolated

    before = _ThisProcess.cells_run
    _ThisProcess.cells_run += 1
    record = run_cell_isolated(task) if task.fresh_process else run_cell(task)
    worker = {
        **(record.worker or {}),  # what the cell itself reported (its exporter's cold start)
        **_whoami(),
        "cells_before": 0 if task.fresh_process else before,
        "fresh_process": task.fresh_process,
        "started_at": started,
        "finished_at": time.time(),
    }
    return record.with_changes(worker=worker)


# One task definition per kind of worker, at module level. CPU cells reuse worker
# processes (imports and exporter warm-up are paid once per process); a cell that fails
# in a reused process runs again in a process spawned for it alone. CUDA cells get a
# worker of their own (max_calls=1): a CUDA context never outlives a cell.
_run_cell_remote = ray.remote(max_retries=0)(_run_cell_here)
_run_cell_remote_gpu = ray.remote(num_gpus=1, max_calls=1, max_retries=0)(_run_cell_here)


def _needs_clean_rerun(record: Record, task: CellTask) -> bool:
    """A cell that failed in a worker which had run other cells before is run again in a
    fresh process, and that run is its record: torch keeps per-process state that can
    make one cell's result depend on another's (seen here: a static export of an LSTM
    model makes the next dynamic export of it fail in the same process). Crashes and
    timeouts already ended their worker; they stay as they are; so do cells whose task
    says not to (`isolate_failures`: sampled cells, see CellTask)."""
    worker = record.worker or {}
    return (
        not task.fresh_process
        and task.isolate_failures
        and not record.status.passing
        and record.status not in (Status.CRASHED, Status.TIMEOUT)
        and worker.get("cells_before", 0) > 0
    )


@ray.remote(max_retries=0)
def _versions_remote() -> dict[str, Any]:
    from harness.store.environment import versions

    return versions()


def _whoami() -> dict[str, Any]:
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


def variant_versions(variants: dict[str, tuple[str, ...]]) -> dict[str, dict[str, Any]]:
    """Package versions as a worker of each variant's runtime_env sees them."""
    refs = {
        name: _versions_remote.options(runtime_env=_runtime_env(specs)).remote()
        for name, specs in variants.items()
    }
    found: dict[str, dict[str, Any]] = {}
    for name, ref in refs.items():
        try:
            found[name] = ray.get(ref)
        except ray_errors.RayError as exc:
            found[name] = {"error": _first_line(exc)}
    return found


def _runtime_env(pip_specs: tuple[str, ...]) -> dict[str, Any] | None:
    return {"pip": list(pip_specs)} if pip_specs else None


def slots(threads: int, device: str = "cpu") -> int:
    """How many cells of this kind the cluster can run at once."""
    resources = ray.cluster_resources()
    if device == "cuda":
        return max(1, int(resources.get("GPU", 0)))
    return max(1, int(resources.get("CPU", 1)) // max(1, threads))


def _submit(task: CellTask, variants: dict[str, tuple[str, ...]]) -> ray.ObjectRef:
    remote = _run_cell_remote_gpu if task.cell.device == "cuda" else _run_cell_remote
    options: dict[str, Any] = {"num_cpus": task.threads}
    env = _runtime_env(variants.get(task.cell.variant, ()))
    if env:
        options["runtime_env"] = env
    return remote.options(**options).remote(task)


@dataclass
class _InFlight:
    task: CellTask
    submitted: float
    submitted_at: float = field(default_factory=time.time)


@dataclass
class DispatchStats:
    submitted: int = 0
    completed: int = 0
    timeouts: int = 0
    crashes: int = 0
    retried: int = 0
    clean_reruns: int = 0
    max_in_flight: int = 0
    peak_in_flight: int = 0
    # Each worker process's first export per exporter (harness.cell.warmup), gathered from
    # every record collected, reruns included.
    cold_starts: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)


MAX_ATTEMPTS = 3


def run_tasks(
    tasks: Iterable[CellTask],
    on_record: Callable[[Record], None],
    *,
    timeout_s: float,
    max_in_flight: int | None = None,
    variants: dict[str, tuple[str, ...]] | None = None,
) -> DispatchStats:
    """Run every task and hand each record to `on_record` as it arrives.

    A cell whose node died is an infrastructure failure: it is submitted again (up to
    MAX_ATTEMPTS) and lands elsewhere. Anything else a cell does, a crash included, is
    its result and is never retried.
    """
    stats = DispatchStats()
    variants = variants or {}
    retry: list[CellTask] = []
    pending: Iterator[CellTask] = iter(tasks)
    in_flight: dict[ray.ObjectRef, _InFlight] = {}
    limit = stats.max_in_flight = max_in_flight or slots(1)
    exhausted = False
    alive = _alive_nodes()
    while in_flight or retry or not exhausted:
        while len(in_flight) < limit and (retry or not exhausted):
            task = retry.pop() if retry else next(pending, None)
            if task is None:
                exhausted = True
                break
            in_flight[_submit(task, variants)] = _InFlight(task, time.perf_counter())
            stats.submitted += 1
            stats.peak_in_flight = max(stats.peak_in_flight, len(in_flight))
        if not in_flight:
            continue
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=POLL_S)
        for ref in ready:
            flight = in_flight.pop(ref)
            record = _collect(ref, flight, stats)
            _note_cold_start(record, stats)
            if (
                record.status is Status.CRASHED
                and _node_lost(alive)
                and flight.task.attempt < MAX_ATTEMPTS
            ):
                stats.retried += 1
                retry.append(replace(flight.task, attempt=flight.task.attempt + 1))
                continue
            if _needs_clean_rerun(record, flight.task):
                stats.clean_reruns += 1
                retry.append(replace(flight.task, fresh_process=True))
                continue
            on_record(_with_overhead(record, flight))
        for ref in _expired(in_flight, timeout_s):
            on_record(_cancel(ref, in_flight.pop(ref), timeout_s, stats))
    return stats


def _note_cold_start(record: Record, stats: DispatchStats) -> None:
    worker = record.worker or {}
    if cold := worker.get("cold_start"):
        where = {"node": worker.get("node"), "pid": worker.get("pid"), "variant": record.variant}
        stats.cold_starts.append({**cold, **where})


def _alive_nodes() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n.get("Alive")}


def _node_lost(alive: set[str]) -> bool:
    """Has a node that was alive at the start died since? (its cells are retried)"""
    return bool(alive - _alive_nodes())


def _with_overhead(record: Record, flight: _InFlight) -> Record:
    """Stamp submission and collection times beside the worker's own start and finish,
    so the scheduling overhead of every cell can be read off its record."""
    if record.worker is None:
        return record
    return record.with_changes(
        worker={**record.worker, "submitted_at": flight.submitted_at, "collected_at": time.time()}
    )


def _collect(ref: ray.ObjectRef, flight: _InFlight, stats: DispatchStats) -> Record:
    stats.completed += 1
    task = flight.task
    try:
        return ray.get(ref)
    except (
        ray_errors.WorkerCrashedError,
        ray_errors.LocalRayletDiedError,
        ray_errors.NodeDiedError,
    ) as exc:
        stats.crashes += 1
        reason = read_crash_log(crash_log_path(task.run_dir, task.cell.cell_id)) or _first_line(exc)
        return _no_run(
            task, Status.CRASHED, f"worker process died while running the cell: {reason}", flight
        )
    except ray_errors.OutOfMemoryError as exc:
        return _no_run(
            task, Status.OOM, f"killed by Ray's memory monitor: {_first_line(exc)}", flight
        )
    except ray_errors.RayTaskError as exc:
        return _no_run(task, Status.HARNESS_ERROR, f"task raised: {_first_line(exc)}", flight)
    except ray_errors.RayError as exc:
        return _no_run(task, Status.CRASHED, f"{type(exc).__name__}: {_first_line(exc)}", flight)


def _expired(in_flight: dict[ray.ObjectRef, _InFlight], timeout_s: float) -> list[ray.ObjectRef]:
    now = time.perf_counter()
    return [ref for ref, f in in_flight.items() if now - f.submitted > timeout_s]


def _cancel(
    ref: ray.ObjectRef, flight: _InFlight, timeout_s: float, stats: DispatchStats
) -> Record:
    """Driver-side timeout: kill the worker running the cell (force cancel)."""
    ray.cancel(ref, force=True)
    stats.completed += 1
    stats.timeouts += 1
    return _no_run(
        flight.task, Status.TIMEOUT, f"no result after {timeout_s:g} s; worker killed", flight
    )


def _no_run(task: CellTask, status: Status, reason: str, flight: _InFlight) -> Record:
    record = Record.without_run(task.cell, task.run_id, status=status, reason=reason)
    return record.with_changes(
        duration_s=time.perf_counter() - flight.submitted, attempt=task.attempt
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
