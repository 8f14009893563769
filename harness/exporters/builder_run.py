"""A model builder's run: the program started as a subprocess of the cell's process (never
imported: onnxruntime_genai's builder appends its own folder to `sys.path`, whose
top-level `builders`, `quantization` and `loaders` modules then shadow and are shadowed),
its output kept in a log, its peak memory from `wait4`, stopped at its time limit; and
what its run means for the cell (`outcome`, pure: tested on hand-made runs).

The builder stays in the cell's process group, so the zygote's kill of a cell that ran
past its timeout takes the builder with it.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.store.status import Status

TAIL_LINES = 12
POLL_S = 0.05
# The environment of every build: offline (nothing downloaded), no progress bars.
QUIET_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TQDM_DISABLE": "1",
    "PYTHONUNBUFFERED": "1",
}


@dataclass(frozen=True)
class Run:
    """What the builder's process did: its exit code (negative: the signal that killed
    it; None: it was stopped at its time limit), its wall time and peak RSS, and the last
    lines it printed."""

    returncode: int | None
    seconds: float
    peak_rss_mb: float | None
    tail: str


@dataclass(frozen=True)
class Outcome:
    """What a run means for the cell: built; skipped (`skip`: the builder's reason: an
    architecture or a precision it does not build); or failed with `status`."""

    built: bool
    skip: str | None = None
    status: Status | None = None
    message: str = ""


def outcome(
    run: Run,
    *,
    graph_written: bool,
    unsupported: Sequence[re.Pattern[str]],
    limit_s: float | None = None,
) -> Outcome:
    """The cell's verdict on a build: a graph written is built; a line matching
    `unsupported` (the builder's own words for an architecture or precision it refuses)
    is a skip with that line; a missing module is a skip naming it; a stop at the time
    limit a timeout, a signal a crash, anything else (or exit 0 without a graph) an
    export failure, each with the builder's last lines."""
    if run.returncode is None:
        return _failed(Status.TIMEOUT, f"the builder ran past its limit of {limit_s:.0f} s", run)
    if run.returncode < 0:
        name = signal.Signals(-run.returncode).name
        return _failed(Status.CRASHED, f"the builder was killed by {name}", run)
    if run.returncode == 0:
        if graph_written:
            return Outcome(built=True)
        return _failed(Status.EXPORT_FAILED, "the builder exited 0 and wrote no graph", run)
    for pattern in unsupported:
        if found := pattern.search(run.tail):
            return Outcome(built=False, skip=found.group(0).strip())
    if missing := _MISSING.search(run.tail):
        module = missing.group(1)
        return Outcome(built=False, skip=f"the builder needs {module}: pip install {module}")
    return _failed(Status.EXPORT_FAILED, last_error(run.tail) or f"exit {run.returncode}", run)


# How Python says a module is not installed (the builder's own, or one it imports and does
# not declare: onnxruntime-genai's wheel declares only numpy and onnxruntime).
_MISSING = re.compile(r"No module named '?([\w.]+)'?")


def _failed(status: Status, first: str, run: Run) -> Outcome:
    return Outcome(built=False, status=status, message=f"{first}\n{run.tail}".strip())


def last_error(text: str) -> str:
    """The last `SomeError: message` line of a traceback, else ''."""
    for line in reversed(text.splitlines()):
        if re.match(r"\s*[A-Za-z_][\w.]*(Error|Exception|Exit)\b", line):
            return line.strip()
    return ""


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last lines of a log; a progress bar's line as its last redraw shows it."""
    kept = [line.rsplit("\r", 1)[-1] for line in text.splitlines() if line.strip()]
    return "\n".join(kept[-lines:])


def run(
    command: Sequence[str],
    *,
    cwd: Path,
    log: Path,
    timeout_s: float | None,
    env: Mapping[str, str] | None = None,
) -> Run:
    """`command` with its output in `log`, waited for with `wait4` (its own peak RSS, not
    every child's high-water mark), killed at `timeout_s`."""
    child_env = {**os.environ, **QUIET_ENV, **(env or {})}
    start = time.perf_counter()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            list(command), cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=child_env
        )
        returncode, peak_kib = _wait(process, start, timeout_s)
    seconds = time.perf_counter() - start
    text = log.read_bytes()[-64_000:].decode("utf-8", "replace")
    peak = None if peak_kib is None else peak_kib / 1024.0  # Linux: ru_maxrss in KiB
    return Run(returncode, seconds, peak, tail(text))


def _wait(
    process: subprocess.Popen[bytes], start: float, timeout_s: float | None
) -> tuple[int | None, int | None]:
    """(exit code, or None where it was stopped at `timeout_s`; its peak RSS in KiB)."""
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, usage.ru_maxrss
        if timeout_s is not None and time.perf_counter() - start > timeout_s:
            process.kill()
            _, _, usage = os.wait4(process.pid, 0)
            process.returncode = -signal.SIGKILL
            return None, usage.ru_maxrss
        time.sleep(POLL_S)
