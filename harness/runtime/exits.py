"""How a zygote watches a cell's child: what it sends back through its pipe, and, where it
sends no record, how it ended (a timeout, a signal, the kernel's OOM killer, its memory
ceiling) as the cell's record (harness.runtime.zygote forks it)."""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import select
import signal
import struct
import time
from dataclasses import dataclass, replace
from pathlib import Path

from harness.cell.node import WaitMeter
from harness.cell.stages import entered
from harness.runtime import limits
from harness.store.details import WorkerInfo
from harness.store.records import CellTask, Record
from harness.store.status import Status

LENGTH = struct.Struct("<Q")  # the record's size, before its pickled bytes
_READ_BYTES = 1 << 20
_POLL_S = 0.2  # how often the child is checked where the kernel has no pidfd
# How often the child's data size is read against its memory ceiling (two /proc files);
# what it grows after the last read is taken from its peak RSS once it died.
_CEILING_S = 0.25


@dataclass(frozen=True)
class ChildExit:
    """How a cell's child ended: what it sent (a whole record, a part, or nothing) and its
    wait status."""

    pid: int
    sent: bytes
    wait_status: int
    timed_out: bool
    oom_killed: bool  # the kernel's OOM killer acted in this memory cgroup meanwhile
    reaped_at: float
    at_ceiling: bool = False  # its data size came to its memory ceiling (limits.CeilingWatch)
    waited_s: float = 0.0  # what it waited for the node, left off its timeout clock

    def record(self, task: CellTask) -> tuple[Record, WorkerInfo]:
        """The child's record and what it cost; or, where it sent none, the record of how
        it ended (timeout, crashed, oom), with its last words where faulthandler left any."""
        facts = WorkerInfo(cell_pid=self.pid, node_wait_s=round(self.waited_s, 4) or None)
        message = _decode(self.sent)
        if message is not None:
            record, child_facts, sent_at = message
            assert isinstance(record, Record), type(record)
            exit_s = round(self.reaped_at - sent_at, 4)
            return record, replace(child_facts, cell_pid=self.pid, exit_s=exit_s)
        log = limits.crash_log_path(task.run_dir, task.cell.cell_id)
        status, reason = self.judged(task.timeout_s, limits.read_crash_log(log))
        log.unlink(missing_ok=True)
        return no_record(task, status, reason), facts

    def judged(self, timeout_s: float | None, last_words: str | None) -> tuple[Status, str]:
        """`judge_exit` of how it ended."""
        return judge_exit(
            self.wait_status,
            timed_out=self.timed_out,
            oom_killed=self.oom_killed,
            timeout_s=timeout_s,
            last_words=last_words,
            at_ceiling=self.at_ceiling,
            waited_s=self.waited_s,
        )

    def sent_payload(self) -> object | None:
        """What the child sent whole (a `Work`'s answer), or None."""
        message = _decode(self.sent)
        return None if message is None else message[0]


def judge_exit(
    wait_status: int,
    *,
    timed_out: bool,
    oom_killed: bool,
    timeout_s: float | None,
    last_words: str | None,
    at_ceiling: bool = False,
    waited_s: float = 0.0,
) -> tuple[Status, str]:
    """The status and reason of a child that sent no record. A crash once its data size
    came to its memory ceiling is `oom`: an allocation failed where it was not checked
    (limits.py: CPython 3.11's ContextVar.set), where a checked one raises MemoryError."""
    if timed_out:
        waited = f", besides {waited_s:.1f} s waiting for the node" if waited_s >= 0.05 else ""
        return Status.TIMEOUT, (
            f"no result after {timeout_s:g} s{waited}; the cell's process was killed"
            " (its worker goes on)"
        )
    if os.WIFSIGNALED(wait_status):
        name = signal.Signals(os.WTERMSIG(wait_status)).name
        if name == "SIGKILL" and oom_killed:
            return Status.OOM, "the cell's process was killed by the kernel's OOM killer (SIGKILL)"
        if name in _CRASH_SIGNALS and at_ceiling:
            words = last_words or name
            return Status.OOM, f"the cell's process died at its memory ceiling: {words}"
        return Status.CRASHED, f"the cell's process died: {last_words or name}"
    code = os.waitstatus_to_exitcode(wait_status)
    return Status.CRASHED, f"the cell's process exited with code {code} before sending its record"


_CRASH_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGABRT")


def wait_for(
    pid: int,
    fd: int,
    timeout_s: float | None,
    oom_kills_before: int | None,
    ceiling: limits.CeilingWatch | None = None,
    waits: WaitMeter | None = None,
) -> ChildExit:
    """Read what the child sends until it exits, or kill its process group at the
    deadline; with a `ceiling` to watch, read its data size every _CEILING_S meanwhile.
    The deadline moves by what the child waited for the node (`waits`), up to another
    `timeout_s`: the cell's clock counts its own work, not other cells' timings."""
    clock = _Clock(time.perf_counter(), timeout_s, waits)
    exits = _pidfd(pid)
    tick = _POLL_S if exits is None else (_CEILING_S if ceiling is not None else None)
    os.set_blocking(fd, False)
    sent, reading = bytearray(), True
    status: int | None = None
    timed_out = False
    while status is None:
        left = clock.left()
        if left == 0.0:
            _kill_group(pid)
            _, status, usage = os.wait4(pid, 0)
            timed_out = True
            break
        watched = [f for f in (fd if reading else None, exits) if f is not None]
        wait = min(tick or math.inf, left if left is not None else math.inf)
        ready, _, _ = select.select(watched, [], [], None if wait == math.inf else wait)
        if ceiling is not None:
            ceiling.sample()
        if fd in ready:
            reading = _read(fd, sent)
        if exits is None or exits in ready:
            done, wait_status, usage = os.wait4(pid, os.WNOHANG)
            status = wait_status if done else None
    reaped_at = time.perf_counter()
    _read(fd, sent)  # what it wrote before it exited (what it started: `end_group`)
    if exits is not None:
        os.close(exits)
    oom = oom_kills_before is not None and (oom_kills() or 0) > oom_kills_before
    at_ceiling = ceiling is not None and ceiling.after_exit(usage.ru_maxrss << 10)
    return ChildExit(
        pid, bytes(sent), status, timed_out, oom, reaped_at, at_ceiling, clock.forgiven_s()
    )


@dataclass(frozen=True)
class _Clock:
    """A child's timeout clock: from its fork, less what it waited for the node (at most
    `timeout_s` of it)."""

    started: float
    timeout_s: float | None
    waits: WaitMeter | None

    def forgiven_s(self) -> float:
        if self.waits is None or self.timeout_s is None:
            return 0.0
        return min(self.waits.waited_s(), self.timeout_s)

    def left(self) -> float | None:
        """Seconds to the deadline (0.0 once past it), None without one."""
        if self.timeout_s is None:
            return None
        spent = time.perf_counter() - self.started - self.forgiven_s()
        return max(0.0, self.timeout_s - spent)


def _read(fd: int, into: bytearray) -> bool:
    """Append what the pipe holds now; False at its end."""
    while True:
        try:
            chunk = os.read(fd, _READ_BYTES)
        except BlockingIOError:
            return True
        if not chunk:
            return False
        into += chunk


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (Linux >= 5.3), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def own_group(pid: int) -> None:
    """Put the child in a process group of its own (it does so too: whichever runs first)."""
    with contextlib.suppress(OSError):  # it already did, or already exited
        os.setpgid(pid, pid)


def end_group(pid: int, bound_s: float = 5.0) -> None:
    """Kill what is left of the child's process group and wait, up to `bound_s`, until the
    kernel has taken it all down (SIGKILL takes a moment on a loaded machine)."""
    _kill_group(pid)
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.01)


def _kill_group(pid: int) -> None:
    """Kill the child and whatever it started."""
    for kill in (os.kill, os.killpg):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _decode(sent: bytes) -> tuple[object, WorkerInfo, float] | None:
    if len(sent) < LENGTH.size:
        return None
    (size,) = LENGTH.unpack_from(sent)
    if len(sent) != LENGTH.size + size:
        return None
    message: tuple[object, WorkerInfo, float] = pickle.loads(sent[LENGTH.size :])
    return message


_OOM_COUNTERS = (  # cgroup v2, then v1: the kernel's OOM kills in this memory cgroup
    (Path("/sys/fs/cgroup/memory.events"), "oom_kill"),
    (Path("/sys/fs/cgroup/memory/memory.oom_control"), "oom_kill"),
)


def oom_kills(counters: tuple[tuple[Path, str], ...] = _OOM_COUNTERS) -> int | None:
    """How many processes the kernel's OOM killer has killed in this memory cgroup; None
    where no counter can be read (then a SIGKILL is a crash, never a guessed oom)."""
    for path, key in counters:
        try:
            lines = path.read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(" ")
            if name == key:
                return int(value)
    return None


def _with_its_stages(record: Record, task: CellTask) -> Record:
    """A killed cell's record with the stages it had entered (their seconds, the last one's
    up to now) and, in its reason, the stage it was killed in."""
    notes = limits.stage_notes_path(task.run_dir, task.cell.cell_id)
    spent = entered(notes)
    notes.unlink(missing_ok=True)
    if not spent:
        return record
    last = next(reversed(spent))
    return record.with_changes(
        reason=f"{record.reason}; in its {last} stage, {spent[last]:.0f} s in",
        stage_s={name: round(seconds, 4) for name, seconds in spent.items()},
    )


def no_record(task: CellTask, status: Status, reason: str) -> Record:
    """The record of a cell that sent none (or never ran): `status` with its reason, and
    the stages it had entered."""
    record = Record.without_run(task.cell, task.run_id, status=status, reason=reason)
    return _with_its_stages(record.with_changes(attempt=task.attempt), task)
