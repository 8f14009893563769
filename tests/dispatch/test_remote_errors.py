"""What a task's Ray error says (harness/dispatch/remote.py `failure_of`), from Ray's own
exception classes, made by hand: no Ray instance is started."""

from __future__ import annotations

from ray import exceptions as ray_errors

from harness.dispatch.policy import Evidence, Failure
from harness.dispatch.remote import NODE_DEATH_TEXT, failure_of

NODE = "0ac1bf" * 4


def test_a_dead_worker_is_died_with_worker_evidence() -> None:
    failed = failure_of(ray_errors.WorkerCrashedError())
    assert (failed.failure, failed.evidence, failed.node) == (Failure.DIED, Evidence.WORKER, None)


def test_a_node_death_message_names_its_node() -> None:
    exc = ray_errors.RayError(f"The {NODE_DEATH_TEXT}. node ID: {NODE}")
    failed = failure_of(exc)
    assert (failed.failure, failed.evidence, failed.node) == (Failure.OTHER, Evidence.NODE, NODE)
    assert failed.message.startswith("RayError: The node it was running on")


def test_rays_memory_monitor_is_its_own_failure() -> None:
    failed = failure_of(
        ray_errors.OutOfMemoryError("Task was killed due to the node running low on memory.")
    )
    assert (failed.failure, failed.evidence) == (Failure.MEMORY_MONITOR, None)
    assert "low on memory" in failed.message


def test_a_task_that_raised_is_named_by_its_own_exception() -> None:
    """A zygote's exception reaches Ray with the pool's traceback as its cause, and Ray's
    message starts with that traceback's header: the record names the exception itself."""
    from concurrent.futures.process import _RemoteTraceback

    cause = ModuleNotFoundError("No module named 'transformers'")
    cause.__cause__ = _RemoteTraceback('\n"""\nTraceback (most recent call last):\n"""')
    header = "Traceback (most recent call last):\nconcurrent.futures.process._RemoteTraceback:\n"
    failed = failure_of(ray_errors.RayTaskError("run_cell", header, cause))
    assert failed.failure is Failure.RAISED
    assert failed.message == "ModuleNotFoundError: No module named 'transformers'"
