"""Timed phases that do not overlap: a cell's export and latency loops run with the node to
themselves, while its other work (build, reference, checker, session, numerics) shares the
node with other cells' other work.

Two cells on one node slowed each other's figures (issue 47: a Qwen3-0.6B cell's ORT p50
1.49 times a plain script's, its export 1.56 times, beside the other cell of its 2-core
worker; alone, 0.96 and within 10%). So every cell holds the node shared while it runs and
exclusively while it times: a readers-writer lock of two `flock`ed files in the node's temp
folder (every harness process of the machine, any run, sees them): `work` (shared by the
cells working, exclusive to one timing) and a `gate` a cell waiting to time closes, so that
no new work starts before it gets its turn. The kernel lets go of a process's locks when it
dies, so a crashed or killed cell holds nothing. What a cell waited for its turn is its
record's (`worker.node_wait_s`)."""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import tempfile
import time
from collections.abc import Iterator
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


def process_waited_s() -> float:
    """The seconds this process has waited for its turn on the node so far (every hold's:
    to start work, to time alone, to go back to work; a forked process starts from none);
    what a piece of work waited is the difference across it."""
    return _WAITED_S[0]


def _forget_waits() -> None:
    _WAITED_S[0] = 0.0


os.register_at_fork(after_in_child=_forget_waits)


class NodeLock:
    """This process's hold on the node: shared while it works, exclusive while it times."""

    def __init__(self, folder: Path | None = None) -> None:
        where = folder or _configured_folder()
        where.mkdir(parents=True, exist_ok=True)
        self.folder = where
        self.gate = _open(where / "gate")
        self.work = _open(where / "work")
        self.depth = 0

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        """Hold the node shared: other cells may work beside this one, none may time."""
        self._wait(fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self.work, fcntl.LOCK_UN)

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

    def _wait(self, mode: int) -> None:
        """Pass the gate in `mode`, counting the wait as this process's."""
        start = time.perf_counter()
        try:
            self._pass_gate(mode)
        finally:  # a wait that raised was waited all the same (the zygote's meter counts it)
            _WAITED_S[0] += time.perf_counter() - start

    def _pass_gate(self, mode: int) -> None:
        """Take the work lock in `mode` through the gate: a cell waiting to time holds the
        gate, so work that comes after it waits behind it."""
        for meter in _METER:
            meter.begin()
        try:
            fcntl.flock(self.gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(self.work, mode)
            finally:
                fcntl.flock(self.gate, fcntl.LOCK_UN)
        finally:
            for meter in _METER:
                meter.end()

    def close(self) -> None:
        os.close(self.gate)
        os.close(self.work)


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
def holding(folder: Path | None = None) -> Iterator[NodeLock]:
    """The node held shared for the block (a cell's whole run); `alone()` times in it. A
    process that holds it already (work that runs a cell: debt's tries) goes on with its
    hold: a second one would wait on the first to time alone, for ever."""
    if _HELD and folder in (None, _HELD[-1].folder):
        yield _HELD[-1]
        return
    lock = NodeLock(folder)
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
