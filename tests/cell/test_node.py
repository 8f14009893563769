"""The node lock (harness/cell/node.py): real processes on one folder of lock files, as the
cells of one machine are. Two cells never time at once, work that comes after a cell
waiting to time waits behind it, and a killed cell holds nothing."""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import time
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

from harness.cell import node

FORK = multiprocessing.get_context("fork")
HOLD_S = 0.6


def _time_alone(folder: Path, out: Queue[Any], ready: Any = None, asking: Any = None) -> None:
    """A cell: works, then times alone for HOLD_S; reports its timing interval and wait.
    With `ready` (a barrier), it asks to time once every cell of the test is working; it
    sets `asking` (an event) as it asks."""
    with node.holding(folder) as lock:
        if ready is not None:
            ready.wait(30)
        if asking is not None:
            asking.set()
        with lock.alone():
            start = time.monotonic()
            time.sleep(HOLD_S)
            end = time.monotonic()
        out.put((start, end, lock.waited_s))


def _work(folder: Path, seconds: float, out: Queue[Any], started: Any = None) -> None:
    """A cell that only works (shared) for `seconds`; reports when its work started."""
    with node.holding(folder):
        if started is not None:
            started.set()
        out.put(("work", time.monotonic()))
        time.sleep(seconds)


def _run(*processes: Any) -> None:
    for p in processes:
        p.join(timeout=30)
        assert p.exitcode == 0, p.exitcode


def test_two_cells_never_time_at_once(tmp_path: Path) -> None:
    out: Queue[Any] = FORK.Queue()
    ready = FORK.Barrier(3)  # all three working before any asks to time: they must queue
    cells = [FORK.Process(target=_time_alone, args=(tmp_path, out, ready)) for _ in range(3)]
    for p in cells:
        p.start()
    _run(*cells)
    intervals = sorted(out.get(timeout=5) for _ in cells)
    for (_, end, _), (start, _, _) in itertools.pairwise(intervals):
        assert start >= end, intervals  # each timing starts after the one before ended
    waits = sorted(w for _, _, w in intervals)
    assert waits[-1] >= HOLD_S, waits  # the last in line waited for a whole timing at least


def test_work_that_comes_after_a_cell_waiting_to_time_waits_behind_it(tmp_path: Path) -> None:
    """A works (shared) for 3 s; B asks to time meanwhile and waits for A; C starts working
    after B asked: C starts only once B has timed (B is not starved by a stream of work)."""
    out: Queue[Any] = FORK.Queue()
    a_started = FORK.Event()
    a = FORK.Process(target=_work, args=(tmp_path, 3.0, out, a_started))
    a.start()
    assert a_started.wait(10)
    b_asking = FORK.Event()
    b = FORK.Process(target=_time_alone, args=(tmp_path, out, None, b_asking))
    b.start()
    assert b_asking.wait(10)
    time.sleep(0.3)  # B is waiting at the gate by now
    c = FORK.Process(target=_work, args=(tmp_path, 0.0, out))
    c.start()
    _run(a, b, c)
    found = [out.get(timeout=5) for _ in range(3)]
    (c_start,) = [t for kind, t, *_ in found if kind == "work"][1:]
    (b_timing,) = [f for f in found if f[0] != "work"]
    _, b_end, b_waited = b_timing
    assert b_waited >= 0.3  # B waited for A's work to end
    assert c_start >= b_end, (b_timing, c_start)


def test_a_killed_cell_holds_nothing(tmp_path: Path) -> None:
    ready = FORK.Event()

    def hold_forever() -> None:
        with node.holding(tmp_path) as lock, lock.alone():
            ready.set()
            time.sleep(60)

    holder = FORK.Process(target=hold_forever)
    holder.start()
    assert ready.wait(10)
    os.kill(holder.pid or 0, signal.SIGKILL)
    holder.join(timeout=10)
    out: Queue[Any] = FORK.Queue()
    after = FORK.Process(target=_time_alone, args=(tmp_path, out))
    after.start()
    _run(after)
    _, _, waited = out.get(timeout=5)
    assert waited < 1.0  # the kernel let go of the killed process's lock at once
