"""Work on a cell other than running it (repro's minimizer, debt's search) runs as a cell
does: in a child forked from a zygote, seeded, under a memory ceiling, killed past its
time. What it returns, what it raised or how its process died is its answer, and the
zygote serves the next. Real processes, nothing mocked."""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from harness.runtime.kept import ZygotePool
from harness.runtime.zygote import Done, Work

MARK = "HARNESS_TEST_WORK_MARK"


def changes_its_process(value: str) -> tuple[int, int]:
    """Leaves a mark in the process (an environment variable, the global seed) and says
    which process it ran in and which zygote forked it."""
    os.environ[MARK] = value
    torch.manual_seed(12345)
    return os.getpid(), os.getppid()


def looks_around(_: None) -> tuple[str | None, float, int, int]:
    return os.environ.get(MARK), torch.rand(1).item(), os.getpid(), os.getppid()


def raises(message: str) -> None:
    raise ValueError(message)


def sleeps(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def segfaults(_: None) -> None:
    ctypes.string_at(0)


def hoards(gib: float) -> int:
    return len(bytearray(int(gib * 1024**3)))


def starts(_: None) -> float:
    return time.monotonic()


@pytest.fixture(scope="module")
def pool() -> Iterator[ZygotePool]:
    zygotes = ZygotePool()
    try:
        yield zygotes
    finally:
        zygotes.close()


def _call(pool: ZygotePool, function: object, given: object, **kw: float) -> Done[object]:
    settings = {"timeout_s": 120.0, **kw}
    return pool.call(Work(function, given, "torchscript", 18, **settings))  # type: ignore[arg-type]


@pytest.mark.slow  # a zygote of its own, or seconds of a real hold of the node
def test_work_returns_its_value_and_its_changes_end_with_its_process(pool: ZygotePool) -> None:
    changed = _call(pool, changes_its_process, "changed")
    seen = _call(pool, looks_around, None)
    assert changed.failure is None and changed.value is not None
    assert seen.failure is None and seen.value is not None
    mark, drawn, pid, zygote = seen.value
    assert mark is None  # the first work's environment ended with its process
    torch.manual_seed(0)
    assert drawn == torch.rand(1).item()  # seeded as every cell is, not by the first work
    assert changed.value[1] == zygote != os.getpid()  # both forked from one zygote
    assert len({changed.value[0], pid, zygote}) == 3


def test_what_work_raised_is_its_failure(pool: ZygotePool) -> None:
    assert _call(pool, raises, "no such layer") == Done(failure="ValueError: no such layer")


def test_work_past_its_time_is_killed_and_the_zygote_goes_on(pool: ZygotePool) -> None:
    done = _call(pool, sleeps, 60.0, timeout_s=1.0)
    assert done.value is None and done.failure is not None
    assert done.failure.startswith("no result after 1 s"), done.failure
    assert _call(pool, sleeps, 0.0) == Done("woke")


def test_work_that_crashes_its_process_says_with_what(pool: ZygotePool) -> None:
    done = _call(pool, segfaults, None)
    assert done.value is None and "SIGSEGV" in (done.failure or ""), done
    assert _call(pool, sleeps, 0.0) == Done("woke")


def test_work_over_its_memory_ceiling_fails_alone(pool: ZygotePool) -> None:
    done = _call(pool, hoards, 2.0, max_memory_gb=0.5)
    assert done.failure is not None and done.failure.startswith("MemoryError"), done
    assert _call(pool, hoards, 0.01, max_memory_gb=0.5) == Done(int(0.01 * 1024**3))


@pytest.mark.slow  # a zygote of its own, or seconds of a real hold of the node
def test_work_and_a_zygotes_warm_up_wait_while_a_cell_times_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another cell holds the node alone (real lock files, a real holder process): a new
    zygote's warm-up and the work it forks (a minimizer's tries, debt's
    exports) wait for that timing to end. Both ran beside it, and a timed loop met a core's
    worth of someone else's CPU (a real-size run: the cold start and warm-up of one zygote
    during the other cell's export timing, whose export_s read 2.3 s against 0.94)."""
    from harness.cell import node
    from harness.runtime import zygote
    from tests.conftest import node_held_alone

    with node_held_alone(monkeypatch, tmp_path / "locks", 2.0) as released:
        zygote._prepare("torchscript", 18, (f"harness_test_not_a_module_{os.getpid()}",))
        prepared = time.monotonic()
        let_go = released()
    assert prepared >= let_go
    monkeypatch.setenv(node.FOLDER_ENV, str(tmp_path / "locks"))
    zygotes = ZygotePool()  # its zygote sees this node's locks, and is warm before the hold
    try:
        assert _call(zygotes, sleeps, 0.0) == Done("woke")
        with node_held_alone(monkeypatch, tmp_path / "locks", 2.0) as released:
            done = _call(zygotes, starts, None)
            let_go = released()
    finally:
        zygotes.close()
    assert done.failure is None and done.value is not None and done.value >= let_go


@pytest.mark.slow  # a zygote of its own, or seconds of a real hold of the node
def test_waiting_for_another_cells_timing_is_not_the_works_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another cell holds the node alone (a real holder process) longer than the work's
    timeout: the wait is left off the work's clock, which counts its own work, up to as long
    again as its timeout (a cell on a busy node waited minutes for others' latency loops at
    real size, and was killed for it). Past that it is killed, saying how long it waited."""
    from harness.cell import node
    from tests.conftest import node_held_alone

    monkeypatch.setenv(node.FOLDER_ENV, str(tmp_path / "locks"))
    zygotes = ZygotePool()  # warm before each hold: its own warm-up waits for the node too
    try:
        assert _call(zygotes, sleeps, 0.0) == Done("woke")
        with node_held_alone(monkeypatch, tmp_path / "locks", 3.0) as released:
            waited = _call(zygotes, starts, None, timeout_s=2.0)
            let_go = released()
        with node_held_alone(monkeypatch, tmp_path / "locks", 8.0) as released:
            began = time.monotonic()
            too_long = _call(zygotes, sleeps, 0.0, timeout_s=2.0)
            killed_after = time.monotonic() - began
            released()
    finally:
        zygotes.close()
    assert waited.failure is None and waited.value is not None and waited.value >= let_go
    assert too_long.failure is not None, too_long
    assert too_long.failure.startswith("no result after 2 s, besides 2.0 s waiting for the node")
    assert 4.0 <= killed_after < 8.0  # its timeout and as long again of waiting, not the hold
