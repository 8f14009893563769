"""The node lock (harness/cell/node.py): real processes on one folder of lock files, as the
cells of one machine are. Two cells never time at once, work that comes after a cell
waiting to time waits behind it, and a killed cell holds nothing."""

from __future__ import annotations

import fcntl
import itertools
import multiprocessing
import os
import signal
import time
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import pytest

from harness.cell import node
from tests.conftest import node_held_alone

FORK = multiprocessing.get_context("fork")
HOLD_S = 0.6


def _time_alone(folder: Path, out: Queue[Any], ready: Any = None) -> None:
    """A cell: works, then times alone for HOLD_S, then works again; reports when it asked
    to time, its timing's start and end, when it was back at work, and the waits its process
    recorded by then: to time, and in all. With `ready` (a barrier), it asks once every
    cell of the test is working."""
    with node.holding(folder) as lock:
        if ready is not None:
            ready.wait(30)
        asked = time.monotonic()
        with lock.alone():
            start, to_time = time.monotonic(), node.process_waited_s()
            time.sleep(HOLD_S)
            end = time.monotonic()
        back = time.monotonic()
        out.put(("timed", asked, start, end, to_time, back, node.process_waited_s()))


def _work(folder: Path, seconds: float, out: Queue[Any], started: Any = None) -> None:
    """A cell that only works (shared) for `seconds`; reports when its work started."""
    with node.holding(folder):
        if started is not None:
            started.set()
        out.put(("work", time.monotonic()))
        time.sleep(seconds)


def _run(*processes: Any) -> None:
    for p in processes:
        p.join(timeout=60)
        assert p.exitcode == 0, p.exitcode


def _gate_is_held(folder: Path) -> bool:
    """Whether a cell holds the gate: one waiting for its turn to time holds it."""
    fd = os.open(folder / "gate", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing lets go of a lock taken here
    return False


def test_two_cells_never_time_at_once_and_each_records_its_wait(tmp_path: Path) -> None:
    out: Queue[Any] = FORK.Queue()
    ready = FORK.Barrier(3)  # all three working before any asks to time
    cells = [FORK.Process(target=_time_alone, args=(tmp_path, out, ready)) for _ in range(3)]
    for p in cells:
        p.start()
    _run(*cells)
    timed = sorted((out.get(timeout=5)[1:] for _ in cells), key=lambda t: t[1])
    for before, after in itertools.pairwise(timed):
        assert after[1] >= before[2], timed  # each timing starts after the one before ended
    for asked, start, end, to_time, back, waited in timed:
        assert abs((start - asked) - to_time) < 0.1, timed  # the wait it records is its own
        assert abs((back - end) - (waited - to_time)) < 0.1, timed  # and the wait back
    # the first to time goes back to work behind the next one's timing, and counts it
    assert timed[0][5] - timed[0][3] > HOLD_S / 2, timed


def test_work_that_comes_after_a_cell_waiting_to_time_waits_behind_it(tmp_path: Path) -> None:
    """A works (shared) for 2 s; B asks to time meanwhile and waits for A at the gate; C
    starts working after that: C starts only once B has timed (a stream of work never
    starves a cell waiting to time)."""
    out: Queue[Any] = FORK.Queue()
    a_started = FORK.Event()
    a = FORK.Process(target=_work, args=(tmp_path, 2.0, out, a_started))
    a.start()
    assert a_started.wait(30)
    b = FORK.Process(target=_time_alone, args=(tmp_path, out))
    b.start()
    deadline, held = time.monotonic() + 30, 0
    while held < 3:  # B holds the gate 3 looks in a row (0.1 s): it waits there to time
        assert time.monotonic() < deadline and b.is_alive()
        held = held + 1 if _gate_is_held(tmp_path) else 0
        time.sleep(0.05)
    c = FORK.Process(target=_work, args=(tmp_path, 0.0, out))
    c.start()
    _run(a, b, c)
    found = [out.get(timeout=5) for _ in range(3)]
    work_starts = sorted(t for kind, t, *_ in found if kind == "work")
    (_, _, b_start, b_end, *_) = next(f for f in found if f[0] == "timed")
    assert b_start >= work_starts[0] + 1.9  # B waited for A's 2 s of work to end
    assert work_starts[1] >= b_end, (found,)  # C's work began once B had timed


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
    _, asked, start, _, _, _, waited = out.get(timeout=5)
    assert (
        waited < 1.0 and start - asked < 1.0
    )  # the kernel let go of the killed process's lock at once


def _nested_then_alone(folder: Path, out: Queue[Any]) -> None:
    """Work that runs a cell (debt's tries: `run_cell` inside a zygote's work): the cell's
    hold inside the work's, then its export timed alone."""
    os.environ[node.FOLDER_ENV] = str(folder)
    with node.holding(), node.holding(), node.alone():
        out.put(("timed", time.monotonic()))
    with node.holding(folder), node.holding(folder), node.alone():  # named, the same node
        out.put(("timed", time.monotonic()))


def test_a_cell_run_inside_held_work_times_alone_without_waiting_on_itself(
    tmp_path: Path,
) -> None:
    """Two holds of one process were two shares of the lock: its `alone()` waited for the
    outer one to let go, which it never did (debt's search hung at its first export)."""
    out: Queue[Any] = FORK.Queue()
    p = FORK.Process(target=_nested_then_alone, args=(tmp_path, out))
    p.start()
    p.join(timeout=20)
    if p.exitcode is None:
        p.kill()
    assert p.exitcode == 0, "it waited on its own hold"
    assert [out.get(timeout=5)[0] for _ in range(2)] == ["timed", "timed"]


def test_each_test_process_is_a_node_of_its_own() -> None:
    """The suite's set-up (tests/conftest.py): this process's cells lock a folder named for
    this process, not one it inherited (an xdist worker inherits its controller's: every
    worker's cells then waited for each other's timings)."""
    folder = Path(os.environ[node.FOLDER_ENV])
    assert folder.name.startswith(f"harness-test-node-{os.getpid()}-")
    assert node.NodeLock().folder == folder


def test_the_wait_to_start_work_is_the_cells_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell that starts while another times alone waits for its first share of the node;
    the process's count of its waits counts it (a cell's `worker.node_wait_s` left it out)."""
    before = node.process_waited_s()
    with node_held_alone(monkeypatch, tmp_path / "locks", HOLD_S * 2) as released:
        asked = time.monotonic()
        with node.holding():
            started = time.monotonic()
        let_go = released()
    waited = node.process_waited_s() - before
    assert started >= let_go
    assert waited > HOLD_S and abs(waited - (started - asked)) < 0.1


def _waits_then_forks(meter: node.WaitMeter, folder: Path, out: Queue[Any]) -> None:
    """A cell's child: reports its waits to `meter`, waits for the node another process
    holds alone, then forks a process of its own that takes the node too."""
    node.report_waits_to(meter)
    with node.holding(folder):
        pass
    child = FORK.Process(target=_holds_briefly, args=(folder, out))
    child.start()
    child.join(30)


def _holds_briefly(folder: Path, out: Queue[Any]) -> None:
    out.put(list(node._METER))  # what this grandchild reports to: nothing
    with node.holding(folder):
        pass


def test_a_childs_waits_reach_its_zygotes_meter_and_its_own_forks_report_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The meter a zygote maps before the fork sees the child's wait for its turn (here the
    first share, while another process times alone), the one in progress as it goes; a
    process the child forks reports to no meter."""
    folder, meter, out = tmp_path / "locks", node.WaitMeter(), FORK.Queue()
    assert meter.waited_s() == 0.0
    meter.end()  # no wait begun: nothing to add
    assert meter.waited_s() == 0.0
    with node_held_alone(monkeypatch, folder, HOLD_S * 4) as released:
        child = FORK.Process(target=_waits_then_forks, args=(meter, folder, out))
        started = time.monotonic()
        child.start()
        in_progress = 0.0
        while in_progress == 0.0 and time.monotonic() < started + HOLD_S * 4:
            in_progress = meter.waited_s()
            time.sleep(0.01)
        let_go = released()
    child.join(30)
    assert child.exitcode == 0 and out.get(timeout=5) == []
    assert 0.0 < in_progress <= meter.waited_s() <= let_go - started + 0.5
