"""Guards a worker puts around one cell: a memory ceiling, and a crash log.

Memory: the soft RLIMIT_DATA of the worker process is set to what it uses now plus the
cell's allowance, so a cell that allocates without bound gets an allocation error (an
`oom` record) long before the kernel's OOM killer or Ray's memory monitor would take the
worker, or the machine, down. The limit is lifted again when the cell ends, since Ray
reuses worker processes.

Crashes: faulthandler writes the fatal signal and the Python stack into a file the driver
reads when the worker dies, so a `crashed` record can name its signal.

A crash at the ceiling: code that does not check a failed allocation crashes where a
checked one raises MemoryError. CPython 3.11's `ContextVar.set` is such code (gh-151773:
`PyContextVar_Set` drops a NULL token), and torch keeps its config overrides in
ContextVars: a cell that hoards under its ceiling can die of SIGSEGV in
`torch/utils/_config_module.py`, `__setattr__`, where a direct call of the same export
met a MemoryError (issue 34). The zygote watches its child's data size against its
ceiling (`CeilingWatch`), so such a death is judged `oom`, as the MemoryError is. So is an
error a cell raises out of its stages once an allocation failed at its ceiling (a
TypeError from torch's config logging, in CI): `memory_limit` notes, as it lifts the
ceiling, whether the process met it (`met_its_ceiling`).
"""

from __future__ import annotations

import contextlib
import faulthandler
import resource
import sys
from collections.abc import Iterator
from pathlib import Path

_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Floating point exception": "SIGFPE",
    "Illegal instruction": "SIGILL",
}
_OOM_MESSAGES = (
    "can't allocate memory",
    "Cannot allocate memory",
    "std::bad_alloc",
    "out of memory",
)


def ceiling_bytes(data_bytes: int, max_gb: float) -> int:
    """The soft RLIMIT_DATA `memory_limit` sets for a process whose data size is
    `data_bytes`: that plus `max_gb`, within the hard limit."""
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    ceiling = data_bytes + int(max_gb * 1024**3)
    return ceiling if hard == resource.RLIM_INFINITY else min(ceiling, hard)


@contextlib.contextmanager
def memory_limit(max_gb: float | None) -> Iterator[None]:
    if not max_gb:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    data = _fields(Path("/proc/self/status"), ("VmData",)).get("VmData", 0) << 10
    ceiling = ceiling_bytes(data, max_gb)
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, hard))
    try:
        yield
    finally:
        # lifted first: at its ceiling, reading /proc could itself fail to allocate
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
        peak = _peak_data(Path("/proc/self/status"))
        _LAST_CEILING_MET[0] = peak is not None and reached_ceiling(peak, ceiling)


# Whether the last ceiling `memory_limit` set in this process was met, read as it was
# lifted: the allocation that failed there can surface later as another error, out of
# the cell's stages (a TypeError from torch's config logging, in CI), when no ceiling is
# left to compare with.
_LAST_CEILING_MET = [False]


def met_its_ceiling() -> bool:
    """Did this process come to the last memory ceiling `memory_limit` set for it?"""
    return _LAST_CEILING_MET[0]


# Within this much of its ceiling (5% of it, at least 64 MiB: the allocation that failed
# may have asked for a block that size), a process has reached it.
CEILING_MARGIN = 0.05
CEILING_MARGIN_MIN_BYTES = 64 << 20


class CeilingWatch:
    """Whether a process (a cell's child, watched by its zygote) came to its soft
    RLIMIT_DATA. `sample()` reads /proc/PID/status and /proc/PID/limits while it lives: its
    data size at its peak is VmPeak less what is not data now (VmSize - VmData), so a peak
    between two samples counts. `after_exit` adds what it made resident after the last
    sample (its peak RSS, which the kernel keeps past its death, from `wait4`)."""

    def __init__(self, pid: int, max_gb: float | None = None) -> None:
        self.proc = Path(f"/proc/{pid}")
        self.reached = False
        self.limit: int | None = None
        self.data = self.rss = 0  # bytes, at the last sample
        # A child that dies before any sample saw its ceiling (it can set its limit and run
        # into it within one sampling interval) is judged from its parent at the fork: its
        # data then, plus `max_gb` (as `memory_limit` sets it), and its resident memory then.
        self.at_fork: tuple[int, int, int] | None = None
        if max_gb:
            mine = _fields(Path("/proc/self/status"), ("VmData", "VmRSS"))
            data, rss = mine.get("VmData", 0) << 10, mine.get("VmRSS", 0) << 10
            self.at_fork = (ceiling_bytes(data, max_gb), data, rss)

    def sample(self) -> None:
        try:
            status = _fields(self.proc / "status", ("VmPeak", "VmSize", "VmData", "VmRSS"))
            limit = _soft_data_limit(self.proc / "limits")
        except (OSError, ValueError, IndexError):
            return  # gone, or not Linux: nothing learnt
        if limit is None or len(status) < 4:
            return  # no ceiling (yet, or any more)
        self.limit, self.data, self.rss = limit, status["VmData"] << 10, status["VmRSS"] << 10
        self.reached = self.reached or reached_ceiling(_peak_of(status), limit)

    def after_exit(self, max_rss_bytes: int) -> bool:
        """Had it come to its ceiling when it died?"""
        if self.reached:
            return True
        if self.limit is not None:
            limit, data, rss = self.limit, self.data, self.rss
        elif self.at_fork is not None:
            limit, data, rss = self.at_fork
        else:
            return False
        return reached_ceiling(data + max(0, max_rss_bytes - rss), limit)


def _peak_data(status_path: Path) -> int | None:
    """The data size of a process at its peak, in bytes, from its /proc status; None where
    it cannot be read (gone, or not Linux)."""
    try:
        return _peak_of(_fields(status_path, ("VmPeak", "VmSize", "VmData")))
    except (OSError, ValueError, IndexError, KeyError):
        return None


def _peak_of(status: dict[str, int]) -> int:
    """VmPeak less what is not data now (VmSize - VmData): a peak between two looks counts."""
    return (status["VmPeak"] - status["VmSize"] + status["VmData"]) << 10


def reached_ceiling(data_bytes: int, limit_bytes: int) -> bool:
    """Is `data_bytes` within the margin of the ceiling `limit_bytes`?"""
    margin = max(CEILING_MARGIN * limit_bytes, CEILING_MARGIN_MIN_BYTES)
    return data_bytes >= limit_bytes - margin


def _fields(path: Path, names: tuple[str, ...]) -> dict[str, int]:
    found = {}
    for line in path.read_text().splitlines():
        name, _, value = line.partition(":")
        if name in names:
            found[name] = int(value.split()[0])
    return found


def _soft_data_limit(path: Path) -> int | None:
    """The soft RLIMIT_DATA in bytes, None where unlimited."""
    for line in path.read_text().splitlines():
        if line.startswith("Max data size"):
            soft = line.split()[3]
            return None if soft == "unlimited" else int(soft)
    return None


def is_out_of_memory(error: BaseException) -> bool:
    """An allocation that failed (a MemoryError, or an allocator's message), in the error
    or in what it was raised from: torch.onnx wraps a MemoryError raised inside
    torch.export in its TorchExportError, and a direct call's user sees that MemoryError
    (a hoarding model under a 1.5 GiB ceiling here: `export_failed` before, `oom` now)."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, MemoryError) or any(m in str(cause) for m in _OOM_MESSAGES):
            return True
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    return False


def crash_log_path(run_dir: str | Path, cell_id: str) -> Path:
    """Where a dying worker leaves its last words (faulthandler), for the driver to read."""
    return Path(run_dir) / ".crash" / f"{cell_id}.log"


def stage_notes_path(run_dir: str | Path, cell_id: str) -> Path:
    """Where a cell notes each stage as it starts: the stage a killed cell was in."""
    return crash_log_path(run_dir, cell_id).with_suffix(".stages")


@contextlib.contextmanager
def crash_log(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        faulthandler.enable(file=f, all_threads=False)
        try:
            yield
        finally:
            faulthandler.enable(file=sys.__stderr__ or sys.stderr)
    path.unlink(missing_ok=True)


def read_crash_log(path: Path) -> str | None:
    """'SIGSEGV (Segmentation fault)' and the top of the stack, from a dead worker's log."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text:
        return None
    lines = text.splitlines()
    head = lines[0].replace("Fatal Python error: ", "")
    signal = next((sig for name, sig in _SIGNALS.items() if name in head), None)
    where = next((ln.strip() for ln in lines if ln.strip().startswith("File ")), "")
    summary = f"{signal} ({head})" if signal else head
    return f"{summary}; last Python frame: {where}" if where else summary
