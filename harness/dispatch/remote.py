"""What runs on Ray's workers, and how it is asked for: the cell's task (one definition
per kind of worker), the start board actor, the version probe of a variant's environment
(and of each node's), the paired timing of `harness compare`; and what a task's Ray error
says about its cell.

Each cell's task runs the cell in a process of its own, forked from the worker's zygote
(`harness.runtime.zygote`), which also enforces the cell's timeout and turns its crashes
into records."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

import ray
from ray import exceptions as ray_errors
from ray.actor import ActorHandle
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from harness.dispatch.cluster import VersionProbe, runtime_env
from harness.dispatch.flight import Start, StartBoard
from harness.dispatch.policy import (
    GPU,
    Evidence,
    Failure,
    RayNode,
    TaskFailure,
    kind,
    node_in_message,
)
from harness.plan.memory import GIB, pair_need_gb
from harness.store.details import WorkerInfo
from harness.store.error_text import first_line, message_line
from harness.store.paired import PairResult, PairTask
from harness.store.records import CellTask, Record

HEAD = "node:__internal_head__"  # the resource Ray gives the head node

_start_board = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=-1)(StartBoard)


def start_board() -> ActorHandle[StartBoard]:
    """The start board, on the head node where one is marked (it lives as long as the
    cluster does); Ray restarts it elsewhere if its node dies."""
    heads = [n["NodeID"] for n in nodes() if n.get("Alive") and HEAD in n.get("Resources", {})]
    here = heads[0] if heads else ray.get_runtime_context().get_node_id()
    affinity = NodeAffinitySchedulingStrategy(here, soft=True)
    board = _start_board.options(scheduling_strategy=affinity).remote()
    return cast(ActorHandle[StartBoard], board)  # Ray types `.remote()` as the handle or the class


def nodes() -> list[RayNode]:
    """`ray.nodes()`: each node's NodeID, Alive, Resources, ... (Ray leaves it untyped)."""
    found: list[RayNode] = ray.nodes()  # type: ignore[no-untyped-call]
    return found


def _run_cell_here(
    task: CellTask, board: ActorHandle[StartBoard] | None = None, flight_id: int = 0
) -> Record:
    started = time.time()
    here = _whoami()
    if board is not None:
        _report_start(board, (flight_id, here.node or "", here.host or "", here.pid or 0, started))
    from harness.runtime.zygote import run_cell_isolated

    # A CPU cell is given no GPU: none of its exports or runs opens a CUDA context beside
    # the CUDA cell timing on it.
    record = run_cell_isolated(task, _assigned_gpus() if kind(task) == GPU else "")
    reported = record.worker or WorkerInfo()  # what the zygote and the cell's process reported
    where = replace(here, started_at=started, finished_at=time.time())
    return record.with_changes(worker=reported.with_facts(where))


def _assigned_gpus() -> str:
    """The GPUs Ray gave this task, as CUDA_VISIBLE_DEVICES names them."""
    return ",".join(ray.get_runtime_context().get_accelerator_ids().get("GPU", []))


def _report_start(board: ActorHandle[StartBoard], start: Start) -> None:
    """Sent, not awaited: a task blocked in `ray.get` gives its CPU back to Ray, which then
    starts a queued cell beside this one on the same slot (seen in CI: two cells on one
    CPU, where slots are fewer than the cells in flight). The message leaves at once, so
    the driver knows where the cell runs long before its child can crash there; one never
    delivered costs the cell nothing: the driver then times it from its submission."""
    board.started.remote(start)


def _whoami() -> WorkerInfo:
    node = ray.get_runtime_context().get_node_id()
    return WorkerInfo(node=node, host=socket.gethostname(), pid=os.getpid())


# One task definition per kind of worker, at module level. Workers and their zygotes are
# reused (imports and warm-up paid once); each cell runs in a child forked from the zygote,
# and only that child touches CUDA, on the GPU Ray gave the task (`_assigned_gpus`). Ray's
# advice of max_calls=1 for GPU tasks frees the GPU memory a worker's framework keeps: here
# the CUDA context and its memory end with the cell's child, so a worker of its own per
# CUDA cell would only pay a new zygote, its imports and warm-up again for every cell.
_run_cell_remote = ray.remote(max_retries=0)(_run_cell_here)
_run_cell_remote_gpu = ray.remote(num_gpus=1, max_retries=0)(_run_cell_here)


def submit(
    task: CellTask,
    variants: Mapping[str, tuple[str, ...]],
    board: ActorHandle[StartBoard] | None,
    flight_id: int,
) -> ray.ObjectRef[Record]:
    """The cell's task, on `task.threads` CPUs (and a GPU for a CUDA cell, and its memory
    need where it is known), in its variant's runtime_env."""
    # Ray's stubs lose the function's arity through `.options(**options)`.
    remote: Any = _run_cell_remote_gpu if kind(task) == GPU else _run_cell_remote
    options: dict[str, object] = {"num_cpus": task.threads}
    if task.memory_gb:  # Ray places the cell on a node with that much memory free
        options["memory"] = int(task.memory_gb * 1024**3)
    env = runtime_env(variants.get(task.cell.variant, ()))
    if env:
        options["runtime_env"] = env
    ref: ray.ObjectRef[Record] = remote.options(**options).remote(task, board, flight_id)
    return ref


@ray.remote(max_retries=0)
def _versions_remote(distributions: tuple[str, ...]) -> VersionProbe:
    from harness.store.environment import distribution_status, versions

    found: VersionProbe = dict(versions())
    if distributions:
        found["distributions"] = distribution_status(distributions)
    return found


def variant_versions(
    variants: dict[str, tuple[str, ...]], *, distributions: tuple[str, ...] = ()
) -> dict[str, VersionProbe]:
    """Package versions as a worker of each variant's runtime_env sees them; with
    `distributions`, also theirs and whether they import (`harness bisect`)."""
    refs = {
        name: _versions_remote.options(runtime_env=runtime_env(specs)).remote(distributions)
        for name, specs in variants.items()
    }
    found: dict[str, VersionProbe] = {}
    for name, ref in refs.items():
        try:
            found[name] = ray.get(ref)
        except ray_errors.RayError as exc:
            found[name] = {"error": message_line(exc)}
    return found


NODE_PROBE_S = 120.0  # a node whose probe has not answered by then is recorded without versions


def node_versions(node_ids: list[str]) -> dict[str, VersionProbe]:
    """The base environment's package versions as a worker on each node sees them (one
    small task per node, pinned there, all waited for together): a node that does not
    answer in NODE_PROBE_S is left out."""
    refs = {
        _versions_remote.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote(()): node
        for node in node_ids
    }
    if not refs:
        return {}
    done, late = ray.wait(list(refs), num_returns=len(refs), timeout=NODE_PROBE_S)
    for ref in late:
        ray.cancel(ref, force=True)
    found: dict[str, VersionProbe] = {}
    for ref in done:
        with contextlib.suppress(ray_errors.RayError):
            found[refs[ref]] = ray.get(ref)
    return found


@ray.remote(max_retries=0)
def _time_pair_remote(task: PairTask) -> PairResult:
    from harness.cell.paired import time_pair

    return time_pair(task)


def submit_pair(task: PairTask) -> ray.ObjectRef[PairResult]:
    """Time a cell's two graphs together on the task's reserved cores (`num_cpus` = its
    threads, so two never share cores) and its memory need (both sessions, beside the
    cells' reservations), at most what the largest node offers: a pair is never left
    waiting for a node that cannot exist."""
    options = pair_options(task, nodes())
    ref: ray.ObjectRef[PairResult] = _time_pair_remote.options(**options).remote(task)
    return ref


def pair_options(task: PairTask, cluster: list[RayNode]) -> dict[str, float]:
    """A pair task's Ray resources: its threads, and its memory need capped at the largest
    alive node's memory."""
    largest = max((n["Resources"].get("memory", 0.0) for n in cluster if n["Alive"]), default=0.0)
    memory = min(pair_need_gb(task) * GIB, largest)
    return {"num_cpus": task.threads, **({"memory": int(memory)} if memory > 0 else {})}


# -- what a task's Ray error says ------------------------------------------------------------


def evidence(exc: ray_errors.RayError) -> Evidence | None:
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


def _raised_line(exc: ray_errors.RayTaskError) -> str:
    """The task's own exception as `Type: first line` (Ray's message starts with its
    traceback's header: every such cell once read `concurrent.futures.process.
    _RemoteTraceback:`), else Ray's first line."""
    cause = getattr(exc, "cause", None)
    return first_line(cause) if isinstance(cause, BaseException) else message_line(exc)


def failure_of(exc: ray_errors.RayError) -> TaskFailure:
    """A task's Ray error as plain data for the driver's decisions
    (`policy.failure_record`, `policy.suspect_of`): what happened, Ray's message, what it
    says of the node, and the node it names."""
    if isinstance(
        exc,
        ray_errors.WorkerCrashedError | ray_errors.LocalRayletDiedError | ray_errors.NodeDiedError,
    ):
        failure, message = Failure.DIED, message_line(exc)
    elif isinstance(exc, ray_errors.OutOfMemoryError):
        failure, message = Failure.MEMORY_MONITOR, message_line(exc)
    elif isinstance(exc, ray_errors.RayTaskError):
        failure, message = Failure.RAISED, _raised_line(exc)
    else:
        failure, message = Failure.OTHER, first_line(exc)
    return TaskFailure(failure, message, evidence(exc), node_in_message(str(exc)))
