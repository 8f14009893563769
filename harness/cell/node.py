"""Timed phases that do not overlap: a cell's export and its latency loops run on cores of
their own (one export at a time on the node), while its other work (build, reference,
checker, session, numerics) shares the node with other cells' other work.

Two cells on one node slowed each other's figures (issue 47: a Qwen3-0.6B cell's ORT p50
1.49 times a plain script's, its export 1.56 times, beside the other cell of its 2-core
worker; alone, 0.96 and within 10%). So every cell holds the node shared while it runs and
exclusively while it times on all its cores: a readers-writer lock of two `flock`ed files in
the node's temp folder (every harness process of the machine, any run, sees them): `work`
(shared by the cells working, exclusive to one timing) and a `gate` a cell waiting to time
closes, so that no new work starts before it gets its turn, and the cells working give
way at the next stage they enter (`let_timers_pass`), or, timing on cores of their own (a
loop, an exporter pair), between two calls (`give_way`). A phase that uses fewer
threads than the node has cores (a 1-thread loop on a 2-core node) times on cores of its
own instead (`timing`): it takes one `core-N` file per thread, exclusively, and goes on
beside other cells' one-thread work. On this 2-core machine two 1-thread ORT loops, or one
beside an export or an eager loop, kept their p50 within 0-4% of the same loop alone, where
a 1-thread loop on the node alone left the other core idle; two real-size exports side by
side did not keep theirs (1.24-1.38 times) where one beside a loop did (1.02-1.05), so an
export also takes the node's `export` file, exclusively, before its cores (`exporting`):
one at a time (benchmarks/README.md, Real size). What other cells did meanwhile is the
record's (`worker.timed_beside`): each holder notes its phase in a `phase-<pid>` file, a
process timing on its cores reads the others' as it starts, and those that enter a phase
while it times write theirs to its `beside-<pid>` file. The kernel lets go of a process's
locks when it dies, so a crashed or killed cell holds nothing. What a cell waited for its
turn is its record's (`worker.node_wait_s`)."""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

FOLDER_ENV = "HARNESS_NODE_LOCKS"  # another folder (the tests': one node per test)


class WaitMeter:
    """How long a cell's child has waited for its turn on the node, read by its zygote: the
    cell's timeout counts its own work, not the others' (memory the zygote maps before the
    fork, so both see it). The seconds of the waits that ended and the monotonic start of
    the one in progress (0: none), behind a count the child makes odd while it writes them,
    so that the zygote never reads half a write."""

    COUNT, TIMES = struct.Struct("Q"), struct.Struct("dd")

    def __init__(self) -> None:
        self.memory = mmap.mmap(-1, self.COUNT.size + self.TIMES.size)

    def begin(self) -> None:
        ended, _ = self._times()
        self._write(ended, time.monotonic())

    def end(self) -> None:
        ended, since = self._times()
        if since:
            self._write(ended + time.monotonic() - since, 0.0)

    def waited_s(self) -> float:
        """The seconds waited so far, the wait in progress included."""
        while True:
            count = self._count()
            ended, since = self._times()
            if count % 2 == 0 and self._count() == count:
                return ended + (time.monotonic() - since if since else 0.0)

    def _write(self, ended: float, since: float) -> None:
        count = self._count()
        self.COUNT.pack_into(self.memory, 0, count + 1)  # odd: being written
        self.TIMES.pack_into(self.memory, self.COUNT.size, ended, since)
        self.COUNT.pack_into(self.memory, 0, count + 2)

    def _count(self) -> int:
        return int(self.COUNT.unpack_from(self.memory)[0])

    def _times(self) -> tuple[float, float]:
        ended, since = self.TIMES.unpack_from(self.memory, self.COUNT.size)
        return float(ended), float(since)


_METER: list[WaitMeter] = []  # this process's, where its zygote reads it (a cell's child)


def report_waits_to(meter: WaitMeter) -> None:
    """This process's waits for the node go to `meter` (its zygote's view of them); a
    process it forks reports none (`os.register_at_fork` below)."""
    _METER[:] = [meter]


os.register_at_fork(after_in_child=_METER.clear)

_WAITED_S = [0.0]  # what this process has waited for the node, all its locks together
# What other cells' processes did while this one timed on cores of its own: "label: phase"
# in the order they were seen, repeats kept (each cell takes those added while it ran)
_BESIDE: list[str] = []
POLL_S = 0.05  # how often a phase waiting for a core of its own looks for one


def process_waited_s() -> float:
    """The seconds this process has waited for its turn on the node so far (every hold's:
    to start work, to time alone, to go back to work; a forked process starts from none);
    what a piece of work waited is the difference across it."""
    return _WAITED_S[0]


def timed_beside() -> list[str]:
    """What other cells did on the node while this process timed on cores of its own, so
    far ("label: phase", repeats kept; a forked process starts from none); what a piece of
    work timed beside is what was added across it."""
    return _BESIDE


def _forget_waits() -> None:
    _WAITED_S[0] = 0.0
    _BESIDE.clear()


os.register_at_fork(after_in_child=_forget_waits)


class NodeLock:
    """This process's hold on the node: shared while it works, exclusive while it times on
    all the node's cores, and on cores of its own while it times on fewer."""

    def __init__(self, folder: Path | None = None, label: str = "") -> None:
        where = folder or _configured_folder()
        where.mkdir(parents=True, exist_ok=True)
        self.folder, self.label = where, label
        self.gate = _open(where / "gate")
        self.work = _open(where / "work")
        self.export = _open(where / "export")
        self.cores = [_open(where / f"core-{i}") for i in range(node_cores())]
        self.cores_held: list[int] = []  # those `timing` holds
        self.depth = 0

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """Hold the node shared: other cells may work beside this one, none may time alone."""
        self._wait(fcntl.LOCK_SH)
        self.note("")
        try:
            yield
        finally:
            fcntl.flock(self.work, fcntl.LOCK_UN)
            self._phase_file(os.getpid()).unlink(missing_ok=True)

    @contextlib.contextmanager
    def timing(self, threads: int, device: str = "cpu") -> Iterator[None]:
        """Time a phase of `threads` threads (from within `working`): on cores of its own
        where the node has more, beside other cells' work (what they did is this process's
        `timed_beside`); with the node alone where it has no more, or where the phase runs
        on an accelerator (the cells of a node may share it). Nested uses hold what the
        outer one holds."""
        if self.depth or device != "cpu" or threads >= len(self.cores):
            with self.alone():
                yield
            return
        self.cores_held = self._wait_for_cores(threads)
        self.depth = 1
        pid = os.getpid()
        self._beside_file(pid).unlink(missing_ok=True)
        self._start_timing()
        try:
            yield
        finally:
            self._stop_timing()
            _BESIDE.extend(_read_and_remove(self._beside_file(pid)))
            self.depth = 0
            self.cores_held = []

    def give_way(self) -> float:
        """Between the calls of a phase timing on cores of its own (`timing`), never inside
        one: where a cell waits to time alone (it holds the gate), give up the cores and
        this share, and take both again behind it; returns the seconds that took. (An
        exporter pair of two 4.9 GB graphs timed for 90 s while a cell waited to time on
        both cores, the other core idle.) What ran meanwhile is not beside the phase."""
        if not self.cores_held or not self._timer_waiting():
            return 0.0
        start = time.perf_counter()
        self._stop_timing()
        fcntl.flock(self.work, fcntl.LOCK_UN)
        self._wait(fcntl.LOCK_SH)
        self.cores_held = self._wait_for_cores(len(self.cores_held))
        self._start_timing()
        return time.perf_counter() - start

    def _start_timing(self) -> None:
        """This process times on its cores from now: its timing file is there before the
        others' phases are read, so that none is missed."""
        self._timing_file(os.getpid()).touch()
        _BESIDE.extend(self._phases_of_others())

    def _stop_timing(self) -> None:
        """This process no longer times: no phase is noted beside it, its cores are free."""
        self._timing_file(os.getpid()).unlink(missing_ok=True)
        for fd in self.cores_held:
            fcntl.flock(fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def exporting(self, threads: int, device: str = "cpu") -> Iterator[None]:
        """An export of `threads` threads (from within `working`): one at a time on the node
        (two real-size exports side by side took 1.24-1.38 times as long as alone), timed as
        any phase is (`timing`): on cores of its own beside other cells' one-thread work,
        which kept it within 1.02-1.05 of alone. The turn is taken before the cores, so a
        phase holding a core never waits for it."""
        if self.depth:
            with self.timing(threads, device):
                yield
            return
        with waiting():
            fcntl.flock(self.export, fcntl.LOCK_EX)
        try:
            with self.timing(threads, device):
                yield
        finally:
            fcntl.flock(self.export, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """Hold the node exclusively (from within `working`, or alone): no other cell works
        or times meanwhile. Nested uses hold it once."""
        if self.depth:
            self.depth += 1
            try:
                yield
            finally:
                self.depth -= 1
            return
        fcntl.flock(self.work, fcntl.LOCK_UN)  # a share this process holds is given up first
        self._wait(fcntl.LOCK_EX)
        self.depth = 1
        try:
            yield
        finally:
            self.depth = 0
            fcntl.flock(self.work, fcntl.LOCK_UN)
            self._wait(fcntl.LOCK_SH)  # back to working, behind a cell waiting to time

    def let_timers_pass(self) -> None:
        """Between phases, never inside a timed one: where a cell waits to time alone (it
        holds the gate), give up this share and take it again behind it. A cell's 1-thread
        timing does not give up its share, so a cell waiting for the node alone would
        otherwise wait for the others' whole runs."""
        if not self.depth and self._timer_waiting():
            fcntl.flock(self.work, fcntl.LOCK_UN)
            self._wait(fcntl.LOCK_SH)

    def _timer_waiting(self) -> bool:
        """Whether a cell waits to time alone: it holds the gate, behind the cells working."""
        try:
            fcntl.flock(self.gate, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.gate, fcntl.LOCK_UN)
        return False

    def note(self, phase: str) -> None:
        """This process's phase, for the cells timing beside it: in its phase file, and in
        the beside file of each process timing on cores of its own now."""
        text = ": ".join(part for part in (self.label, phase) if part) or "working"
        pid = os.getpid()
        with contextlib.suppress(OSError):
            fresh = self._phase_file(pid).with_suffix(".new")
            fresh.write_text(text)
            fresh.replace(self._phase_file(pid))
        for timer in self._alive_pids("timing"):
            if timer != pid:
                with contextlib.suppress(OSError), self._beside_file(timer).open("a") as f:
                    f.write(text + "\n")

    def _phases_of_others(self) -> list[str]:
        pid = os.getpid()
        found = []
        for other in self._alive_pids("phase"):
            with contextlib.suppress(OSError):
                if other != pid and (text := self._phase_file(other).read_text().strip()):
                    found.append(text)
        return found

    def _alive_pids(self, kind: str) -> Iterator[int]:
        """The pids of the `kind` files ("phase-123") whose processes still live; a dead
        one's files (a killed cell's) are removed as they are met."""
        for file in self.folder.glob(f"{kind}-*"):
            pid = file.name.rpartition("-")[2]
            if not pid.isdigit():
                continue
            if alive(int(pid)):
                yield int(pid)
                continue
            for left in (self._phase_file, self._timing_file, self._beside_file):
                left(int(pid)).unlink(missing_ok=True)

    def _phase_file(self, pid: int) -> Path:
        return self.folder / f"phase-{pid}"

    def _timing_file(self, pid: int) -> Path:
        return self.folder / f"timing-{pid}"

    def _beside_file(self, pid: int) -> Path:
        return self.folder / f"beside-{pid}"

    def _wait_for_cores(self, count: int) -> list[int]:
        """Take `count` of the node's core files, waiting (counted) until as many are free."""
        with waiting():
            while not (taken := self._take_cores(count)):
                time.sleep(POLL_S)
        return taken

    def _take_cores(self, count: int) -> list[int]:
        """`count` free core files taken at once, or none (never some: two phases of two
        threads each holding one of three cores would wait on each other)."""
        taken = []
        for fd in self.cores:
            with contextlib.suppress(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                taken.append(fd)
                if len(taken) == count:
                    return taken
        for fd in taken:
            fcntl.flock(fd, fcntl.LOCK_UN)
        return []

    def _wait(self, mode: int) -> None:
        """Pass the gate in `mode`, counting the wait as this process's: a cell waiting to
        time holds the gate, so work that comes after it waits behind it."""
        with waiting():
            fcntl.flock(self.gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(self.work, mode)
            finally:
                fcntl.flock(self.gate, fcntl.LOCK_UN)

    def close(self) -> None:
        for fd in (self.gate, self.work, self.export, *self.cores):
            os.close(fd)


@contextlib.contextmanager
def waiting() -> Iterator[None]:
    """A wait for the node: this process's (a wait that raised was waited all the same),
    and the zygote's meter's while it lasts."""
    start = time.perf_counter()
    for meter in _METER:
        meter.begin()
    try:
        yield
    finally:
        for meter in _METER:
            meter.end()
        _WAITED_S[0] += time.perf_counter() - start


def node_cores() -> int:
    """The cores this machine's processes may run on."""
    return len(os.sched_getaffinity(0))


def alive(pid: int) -> bool:
    """Whether process `pid` lives (another user's too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def _read_and_remove(path: Path) -> list[str]:
    with contextlib.suppress(OSError):
        lines = path.read_text().splitlines()
        path.unlink()
        return [line for line in lines if line]
    return []


def _open(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):  # another user's file: it was opened as it is
        os.chmod(path, 0o666)
    return fd


def default_folder() -> Path:
    """Where every harness process of this machine keeps the node's locks."""
    return Path(tempfile.gettempdir()) / "harness-node"


def _configured_folder() -> Path:
    return Path(os.environ.get(FOLDER_ENV) or default_folder())


_HELD: list[NodeLock] = []  # this process's (a cell's child holds one, for its life)


def folder() -> Path:
    """The node's folder: this process's hold's, else this machine's (what the cells of
    a node share besides the locks: harness.runtime.latency.EagerShare)."""
    return _HELD[-1].folder if _HELD else _configured_folder()


@contextlib.contextmanager
def holding(folder: Path | None = None, label: str = "") -> Iterator[NodeLock]:
    """The node held shared for the block (a cell's whole run, `label` naming it to the
    cells that time beside it); `timing()` and `alone()` time in it. A process that holds
    it already (work that runs a cell: debt's tries) goes on with its hold: a second one
    would wait on the first to time alone, for ever."""
    if _HELD and folder in (None, _HELD[-1].folder):
        yield _HELD[-1]
        return
    lock = NodeLock(folder, label)
    _HELD.append(lock)
    try:
        with lock.working():
            yield lock
    finally:
        _HELD.remove(lock)
        lock.close()


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """The node to this process alone for the block: under `holding`, its lock; a process
    that holds none (a test, a stage run outside a cell) takes one for the block."""
    if _HELD:
        with _HELD[-1].alone():
            yield
        return
    lock = NodeLock()
    try:
        with lock.alone():
            yield
    finally:
        lock.close()


def exporting(threads: int, device: str = "cpu") -> contextlib.AbstractContextManager[None]:
    """An export, one at a time on the node, on cores of its own where the node has more
    (NodeLock.exporting); a process that holds none takes a hold for the block."""
    return _in_hold(lambda lock: lock.exporting(threads, device))


def timing(threads: int, device: str = "cpu") -> contextlib.AbstractContextManager[None]:
    """A phase of `threads` threads on `device` timed: on cores of its own where the node
    has more (NodeLock.timing), else with the node alone; a process that holds none takes a
    hold for the block."""
    return _in_hold(lambda lock: lock.timing(threads, device))


@contextlib.contextmanager
def _in_hold(
    phase: Callable[[NodeLock], contextlib.AbstractContextManager[None]],
) -> Iterator[None]:
    """`phase` of this process's hold on the node; of a hold taken for the block where it
    holds none."""
    if _HELD:
        with phase(_HELD[-1]):
            yield
        return
    lock = NodeLock()
    try:
        with lock.working(), phase(lock):
            yield
    finally:
        lock.close()


def give_way() -> float:
    """Between the calls of a phase timing on cores of its own: let a cell waiting to time
    alone go first (NodeLock.give_way); the seconds that took (none where this process
    holds no cores)."""
    return _HELD[-1].give_way() if _HELD else 0.0


def note_phase(phase: str) -> None:
    """The phase this process enters (where it holds the node: a cell's stages), for the
    cells timing beside it; a cell waiting to time alone goes first."""
    if _HELD:
        _HELD[-1].let_timers_pass()
        _HELD[-1].note(phase)
