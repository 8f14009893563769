"""The latency loop: warm-up ends for any `warmup_min_iters`, the collector is off while
timing, and the sample count follows the protocol."""

from __future__ import annotations

import gc
import itertools
import mmap
import multiprocessing
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cell import node
from harness.cell.timing import (
    STABLE_WINDOW,
    PeakRss,
    _warm_up,
    freeze_survivors,
    gc_paused,
    time_calls,
    time_interleaved,
)
from harness.store.protocol import Protocol


@pytest.mark.timeout(10)
@pytest.mark.parametrize("min_iters", [1, 3, STABLE_WINDOW, STABLE_WINDOW + 1, 7, 50])
def test_warm_up_ends_for_any_minimum(min_iters: int) -> None:
    """The window holds STABLE_WINDOW timings; the minimum is counted apart from it (a
    minimum of 7 or more used to loop forever)."""
    protocol = Protocol(warmup_min_iters=min_iters, warmup_max_s=1.0, warmup_tolerance=10.0)
    calls = []
    assert _warm_up(lambda: calls.append(1), protocol) < 10  # the last call's ms
    assert len(calls) == max(min_iters, 4)  # a stable verdict needs 4 timings


@pytest.mark.timeout(10)
def test_warm_up_stops_at_its_time_cap_once_the_minimum_is_done() -> None:
    protocol = Protocol(warmup_min_iters=8, warmup_max_s=0.0, warmup_tolerance=0.0)
    times = iter([1.0, 5.0] * 100)
    calls = []

    def unsteady() -> None:  # never stable at tolerance 0
        calls.append(next(times))

    _warm_up(unsteady, protocol)
    assert len(calls) == 8


def test_the_collector_is_off_inside_timed_loops_and_restored_after() -> None:
    seen = []
    assert gc.isenabled()
    samples = time_calls(lambda: seen.append(gc.isenabled()), Protocol(min_iters=5, min_time_s=0))
    assert len(samples) == 5
    assert seen and not any(seen)
    assert gc.isenabled()


def test_gc_paused_keeps_a_disabled_collector_disabled() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_interleaved_timing_alternates_and_cancels_drift() -> None:
    """Two calls of equal cost on a machine that slows down steadily (5x over the loop): each side sees
    the slowdown alike, so their ratio stays near 1 (timed one after the other it would not);
    the blocks alternate."""
    import statistics
    import time

    from harness.cell.timing import time_interleaved

    protocol = Protocol(warmup_min_iters=2, warmup_max_s=0.01, min_iters=40, min_time_s=0.3)

    def one_loop() -> tuple[float, int]:
        order: list[str] = []
        start = time.perf_counter()

        def work(name: str) -> None:
            order.append(name)
            slow = 1 + 4 * min(1.0, (time.perf_counter() - start) / 0.6)
            end = time.perf_counter() + slow * 2e-4
            while time.perf_counter() < end:
                pass

        a, b = time_interleaved(lambda: work("a"), lambda: work("b"), protocol)
        assert len(a) >= 40 and len(b) >= 40
        switches = sum(x != y for x, y in itertools.pairwise(order))
        return statistics.median(b) / statistics.median(a), switches

    # The median of three loops: another process taking the core for a moment (a parallel
    # test worker) skews one loop's ratio, not the median of three.
    loops = [one_loop() for _ in range(3)]
    assert min(switches for _, switches in loops) >= 4  # blocks alternate: a.., b.., b.., a..
    assert 0.8 < statistics.median(ratio for ratio, _ in loops) < 1.25
    assert gc.isenabled()


def test_an_interleaved_loops_cap_is_twice_its_max_time_however_unequal_its_sides() -> None:
    """A side 4 times as slow as the other (each call longer than a block), never known
    well enough to stop early: the loop ends at about 2 x max_time_s, warm-ups and the
    blocks' untimed first calls aside (counting the faster side's time took it to 2.5 x
    that), with the slow side the larger share."""
    import time

    from harness.cell.timing import time_interleaved

    def sleeper(seconds: float) -> Callable[[], None]:
        return lambda: time.sleep(seconds)

    protocol = Protocol(
        warmup_min_iters=1, warmup_max_s=0.0, min_iters=2, max_time_s=0.5, target_interval=1e-9
    )
    start = time.perf_counter()
    fast, slow = time_interleaved(sleeper(0.03), sleeper(0.12), protocol)
    took = time.perf_counter() - start
    assert 1.0 < took < 1.8, took
    assert sum(slow) > 2 * sum(fast)


class _Node:
    pass


def test_freeze_survivors_sets_aside_what_is_alive_and_a_cells_garbage_is_still_collected() -> None:
    gc.unfreeze()
    try:
        survivor = _Node()
        freeze_survivors()
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # the test process's modules and everything else alive
        cycle = _Node()
        cycle.me = cycle  # type: ignore[attr-defined]
        gone = weakref.ref(cycle)
        del cycle
        gc.collect()
        assert gone() is None
        # The collection left the frozen objects frozen. Under pytest-xdist, execnet's own
        # thread frees a few frozen objects (its messages) meanwhile: the count may drop
        # by those, never rise, and never go back to the unfrozen generations.
        assert frozen - 100 < gc.get_freeze_count() <= frozen and survivor is not None
    finally:
        gc.unfreeze()


@pytest.mark.parametrize(("n", "capped"), [(1, False), (2, False), (3, True)])
def test_a_capped_loop_still_takes_three_calls(n: int, capped: bool) -> None:
    """Past its time cap a loop of 1-s calls stopped after one (Gemma-3-1B's p50 was one
    call's time): the cap waits for MIN_CAPPED calls."""
    from harness.cell.timing import enough_samples

    protocol = Protocol(min_iters=5, max_time_s=1.0, target_interval=0.03)
    assert enough_samples(n, elapsed=5.0, protocol=protocol, sides=([1.0] * n,)) is capped


@pytest.mark.parametrize(("seconds", "untimed"), [(0.03, 0), (0.002, 1)])
def test_a_long_calls_first_block_makes_no_call_its_warm_up_made(
    seconds: float, untimed: int
) -> None:
    """A call longer than a block (INTERLEAVE_BLOCK_S) is warm from its warm-up: the first
    block times its first call (an untimed one cost a suite run about 100 s); a short
    call's blocks each start with an untimed one."""
    import time

    from harness.cell.timing import INTERLEAVE_BLOCK_S, time_interleaved

    calls = {"a": 0, "b": 0}

    def call(side: str) -> Callable[[], None]:
        def one() -> None:
            calls[side] += 1
            time.sleep(seconds)

        return one

    assert seconds * 1000 > INTERLEAVE_BLOCK_S * 1000 or untimed
    protocol = Protocol(
        warmup_min_iters=2, warmup_max_s=0.0, min_iters=2, min_time_s=0.0, target_interval=0.0
    )
    a, b = time_interleaved(call("a"), call("b"), protocol)
    assert calls["a"] - len(a) == 2 + untimed  # one block each: 2 samples or more
    assert calls["b"] - len(b) == 2 + untimed


@pytest.mark.parametrize("max_iters", [5, 300])
def test_an_interleaved_loop_of_fast_calls_keeps_to_max_iters(max_iters: int) -> None:
    """Calls of microseconds fill a block with thousands: each side stops at the cap (a
    block past it still makes its one call)."""
    from harness.cell.timing import time_interleaved

    protocol = Protocol(
        warmup_min_iters=1, warmup_max_s=0.0, min_iters=2, max_iters=max_iters, max_time_s=5.0,
        target_interval=1e-9,
    )  # fmt: skip
    a, b = time_interleaved(lambda: None, lambda: None, protocol)
    assert max_iters <= len(a) <= max_iters + 1 and max_iters <= len(b) <= max_iters + 1


def test_a_regions_peak_counts_what_it_allocates_not_the_library_pages_it_maps(
    tmp_path: Path,
) -> None:
    """Reading a mapped file raises RSS (RssFile) without allocating, as a forked cell's
    first run of its zygote's library code does: 32 MiB of a mapping read count nothing;
    32 MiB written into the heap count."""
    size = 32 * 1024 * 1024
    library = tmp_path / "library.so"
    library.write_bytes(bytes(range(256)) * (size // 256))
    with (
        library.open("rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as pages,
        PeakRss() as mapped,  # ends first: the mapping outlives it, as a library's does
    ):
        assert sum(pages[i] for i in range(0, size, 4096)) == 0  # each page's first byte
    with PeakRss() as allocated:
        block = b"\x01" * size
    assert len(block) == size
    assert mapped.peak_mb is not None and allocated.peak_mb is not None
    assert mapped.peak_mb < 4 < 28 < allocated.peak_mb


def _alone_once_a_loop_calls(folder: Path, calling: Any, seconds: float, out: Any) -> None:
    """A cell that asks for the node alone once another's loop makes its calls, and holds it."""
    assert calling.wait(30)
    time.sleep(0.1)
    with node.holding(folder) as lock:
        asked = time.monotonic()
        with lock.alone():
            out.put((asked, time.monotonic()))
            time.sleep(seconds)


@pytest.mark.parametrize("interleaved", [False, True])
def test_a_loop_on_a_core_lets_a_cell_waiting_to_time_alone_go_and_keeps_its_own_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interleaved: bool
) -> None:
    """A 1-thread loop (a real forked cell asks for the node alone while it runs) lets the
    cell go after its current call or block, and its `min_time_s` counts its own calls:
    as many as without the pause."""
    folder = tmp_path / "locks"
    folder.mkdir()
    monkeypatch.setenv(node.FOLDER_ENV, str(folder))
    fork = multiprocessing.get_context("fork")
    calling, out = fork.Event(), fork.Queue()
    other = fork.Process(target=_alone_once_a_loop_calls, args=(folder, calling, 0.6, out))
    other.start()
    protocol = Protocol(warmup_min_iters=1, warmup_max_s=0.0, min_iters=5, min_time_s=1.0,
                        max_time_s=30.0, target_interval=0.0)  # fmt: skip

    def call() -> None:
        calling.set()
        time.sleep(0.05)

    waited = node.process_waited_s()
    with node.holding(folder) as lock, lock.timing(1):
        if interleaved:
            samples, _ = time_interleaved(call, call, protocol)
        else:
            samples = time_calls(call, protocol)
    other.join(timeout=30)
    asked, began = out.get(timeout=5)
    assert began - asked < 0.2, began - asked  # after a call or a block, not the loop's end
    assert sum(samples) / 1000 >= (0.5 if interleaved else 1.0) - 0.05, samples
    assert node.process_waited_s() - waited > 0.55  # its pause counted as a wait
