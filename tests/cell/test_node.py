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


# -- phases that time on cores of their own --------------------------------------------------


def _time_on_a_core(
    folder: Path,
    label: str,
    threads: int,
    out: Queue[Any],
    ready: Any = None,
    phase: str = "timing",
) -> None:
    """A cell named `label`: works, then times a phase of `threads` threads for HOLD_S (a
    loop's `timing`, or an export's `exporting`); reports its timing's start and end and
    what it timed beside."""
    with node.holding(folder, label) as lock:
        node.note_phase("build")
        if ready is not None:
            ready.wait(30)
        node.note_phase("export")
        with getattr(lock, phase)(threads):
            start = time.monotonic()
            time.sleep(HOLD_S)
            end = time.monotonic()
        out.put((label, start, end, list(node.timed_beside())))


def _overlap(a: tuple[Any, ...], b: tuple[Any, ...]) -> float:
    return min(a[2], b[2]) - max(a[1], b[1])


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node of two cores, whatever this machine has (forked cells inherit it)."""
    monkeypatch.setattr(node, "node_cores", lambda: 2)


@pytest.mark.usefixtures("two_cores")
def test_one_thread_phases_time_at_once_on_a_core_each_and_say_what_was_beside(
    tmp_path: Path,
) -> None:
    """On a 2-core node three cells time a 1-thread phase: two at once (each on a core of
    its own, each naming the other's phase), the third once a core is free."""
    out: Queue[Any] = FORK.Queue()
    ready = FORK.Barrier(3)
    cells = [
        FORK.Process(target=_time_on_a_core, args=(tmp_path, f"cell {i}", 1, out, ready))
        for i in range(3)
    ]
    for p in cells:
        p.start()
    _run(*cells)
    timed = sorted((out.get(timeout=5) for _ in cells), key=lambda t: t[1])
    first, second, third = timed
    assert _overlap(first, second) > HOLD_S / 2, timed  # two at once
    assert third[1] >= min(first[2], second[2]) - 0.01, timed  # never three
    assert f"{second[0]}: export" in first[3] or f"{second[0]}: build" in first[3], timed
    assert any(text.startswith(first[0]) for text in second[3]), timed


@pytest.mark.usefixtures("two_cores")
def test_exports_take_turns_and_each_times_beside_a_one_thread_loop(tmp_path: Path) -> None:
    """On a 2-core node two cells export and one times a 1-thread loop, all at once: the
    exports never overlap each other, each overlaps the loop (on the other core), and the
    loop names both exports beside it."""
    out: Queue[Any] = FORK.Queue()
    ready = FORK.Barrier(3)
    roles = [("export 0", "exporting"), ("export 1", "exporting"), ("loop", "timing")]
    cells = [
        FORK.Process(target=_time_on_a_core, args=(tmp_path, label, 1, out, ready, phase))
        for label, phase in roles
    ]
    for p in cells:
        p.start()
    _run(*cells)
    timed = {t[0]: t for t in (out.get(timeout=5) for _ in cells)}
    first, second, loop = timed["export 0"], timed["export 1"], timed["loop"]
    assert _overlap(first, second) <= 0.01, timed  # one export at a time
    assert max(_overlap(first, loop), _overlap(second, loop)) > HOLD_S / 2, timed
    named = " ".join(loop[3])
    assert "export 0" in named and "export 1" in named, timed


@pytest.mark.usefixtures("two_cores")
@pytest.mark.parametrize("phase", ["timing", "exporting"])
def test_a_phase_of_every_core_and_an_accelerators_still_time_alone(
    tmp_path: Path, phase: str
) -> None:
    """A 2-thread loop or export on a 2-core node, and a 1-thread one on a GPU (the node's
    cells may share it), never time beside another cell's work."""
    for threads, device in ((2, "cpu"), (1, "cuda")):
        out: Queue[Any] = FORK.Queue()
        started = FORK.Event()
        worker = FORK.Process(target=_work, args=(tmp_path, 1.0, out, started))
        worker.start()
        assert started.wait(30)
        with node.holding(tmp_path, "timer") as lock, getattr(lock, phase)(threads, device):
            began = time.monotonic()
        _run(worker)
        _, work_start = out.get(timeout=5)
        assert began >= work_start + 0.9, (threads, device)  # it waited for the work to end
        assert "worker" not in " ".join(node.timed_beside())


@pytest.mark.usefixtures("two_cores")
def test_work_entering_a_phase_while_a_cell_times_on_its_core_is_named_beside(
    tmp_path: Path,
) -> None:
    """Work that was going on as the timing began (its phase file) and work that entered a
    phase during it (the timer's beside file) are both in the timer's `timed_beside`; work
    that began after is not."""
    built, timing, go_on = FORK.Event(), FORK.Event(), FORK.Event()

    def neighbour() -> None:
        with node.holding(tmp_path, "neighbour"):
            node.note_phase("build")
            built.set()  # noted: a timer that starts now reads it from the phase file only
            assert timing.wait(30)
            node.note_phase("reference")
            go_on.set()

    before = len(node.timed_beside())
    p = FORK.Process(target=neighbour)
    p.start()
    with node.holding(tmp_path, "timer") as lock:
        assert built.wait(30)
        with lock.timing(1):
            timing.set()
            assert go_on.wait(30)
        _run(p)
        node.note_phase("after")
    assert node.timed_beside()[before:] == ["neighbour: build", "neighbour: reference"]
    assert not list(tmp_path.glob("beside-*")) and not list(tmp_path.glob("timing-*"))


@pytest.mark.usefixtures("two_cores")
def test_a_cell_killed_while_timing_on_a_core_holds_no_core(tmp_path: Path) -> None:
    """Two killed 1-thread timers leave both cores free and no neighbour named: the next
    timer times at once, beside nothing, and their files go as it meets them."""
    ready = FORK.Barrier(3)

    def hold_a_core() -> None:
        with node.holding(tmp_path, "killed") as lock, lock.timing(1):
            ready.wait(30)
            time.sleep(60)

    holders = [FORK.Process(target=hold_a_core) for _ in range(2)]
    for h in holders:
        h.start()
    ready.wait(30)
    for h in holders:
        os.kill(h.pid or 0, signal.SIGKILL)
        h.join(timeout=10)
    before = len(node.timed_beside())
    asked = time.monotonic()
    with node.holding(tmp_path, "next") as lock, lock.timing(1):
        started = time.monotonic()
    assert started - asked < 1.0
    assert node.timed_beside()[before:] == []  # a dead process's phase names nothing
    killed = {str(h.pid) for h in holders}
    assert not [f.name for f in tmp_path.iterdir() if f.name.rpartition("-")[2] in killed]


def _works_in_phases(folder: Path, phases: int, out: Queue[Any], started: Any) -> None:
    """A cell that works through `phases` phases of HOLD_S / 3 each, never timing."""
    with node.holding(folder, "worker"):
        started.set()
        for i in range(phases):
            node.note_phase(f"phase {i}")
            time.sleep(HOLD_S / 3)
        out.put(("worked", time.monotonic()))


def test_a_cell_waiting_to_time_alone_goes_at_the_workers_next_phase(tmp_path: Path) -> None:
    """A cell working through its phases (its 1-thread timings keep its share) lets a cell
    waiting for the node alone go at its next phase, not at its end."""
    out: Queue[Any] = FORK.Queue()
    started = FORK.Event()
    worker = FORK.Process(target=_works_in_phases, args=(tmp_path, 9, out, started))
    worker.start()
    assert started.wait(30)
    time.sleep(HOLD_S / 2)
    asked = time.monotonic()
    with node.holding(tmp_path, "timer") as lock, lock.alone():
        began = time.monotonic()
    _run(worker)
    _, worker_done = out.get(timeout=5)
    assert began - asked < HOLD_S / 3 + 0.2, began - asked  # at the worker's next phase
    assert worker_done - began > HOLD_S  # the worker still had phases to go


def _calls_giving_way(folder: Path, calls: int, out: Queue[Any], started: Any) -> None:
    """An exporter pair: times `calls` calls of 0.1 s on a core, giving way between them;
    reports each call's start and end, and the seconds it gave way."""
    with node.holding(folder, "pair") as lock, lock.timing(1):
        started.set()
        spans, given = [], 0.0
        for _ in range(calls):
            start = time.monotonic()
            time.sleep(0.1)
            spans.append((start, time.monotonic()))
            given += node.give_way()
        out.put((spans, given))


@pytest.mark.usefixtures("two_cores")
def test_a_phase_on_a_core_gives_way_between_calls_to_a_cell_waiting_to_time_alone(
    tmp_path: Path,
) -> None:
    """A long 1-thread phase (an exporter pair) lets a cell waiting for the node alone go
    after its current call, not at its end, and goes on with its calls after it; the
    seconds it gave way are the alone cell's."""
    out: Queue[Any] = FORK.Queue()
    started = FORK.Event()
    pair = FORK.Process(target=_calls_giving_way, args=(tmp_path, 20, out, started))
    pair.start()
    assert started.wait(30)
    time.sleep(0.35)
    asked = time.monotonic()
    with node.holding(tmp_path, "timer") as lock, lock.alone():
        began = time.monotonic()
        time.sleep(HOLD_S)
        ended = time.monotonic()
    _run(pair)
    spans, given = out.get(timeout=5)
    assert began - asked < 0.3, began - asked  # after the pair's call, not its 2 s
    assert not [s for s in spans if s[1] > began and s[0] < ended], spans  # none beside
    assert sum(s[0] > ended for s in spans) >= 10  # the pair went on after it
    assert HOLD_S <= given < HOLD_S + 0.4, given


def test_a_phase_gives_no_way_where_no_cell_waits_and_a_process_holding_nothing_none(
    tmp_path: Path,
) -> None:
    with node.holding(tmp_path) as lock, lock.timing(1):
        held = list(lock.cores_held)
        assert node.give_way() == 0.0 and lock.cores_held == held
    assert lock.cores_held == [] and node.give_way() == 0.0
