"""Guards a worker puts around one cell: a memory ceiling, and a crash log.

Memory: the soft RLIMIT_DATA of the worker process is set to what it uses now plus the
cell's allowance, so a cell that allocates without bound gets an allocation error (an
`oom` record) long before the kernel's OOM killer or Ray's memory monitor would take the
worker, or the machine, down. The limit is lifted again when the cell ends, since Ray
reuses worker processes.

Crashes: faulthandler writes the fatal signal and the Python stack into a file the driver
reads when the worker dies, so a `crashed` record can name its signal.
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


def _data_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1])
    return 0


@contextlib.contextmanager
def memory_limit(max_gb: float | None) -> Iterator[None]:
    if not max_gb:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    ceiling = _data_kib() * 1024 + int(max_gb * 1024**3)
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


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
