"""Minimal repros for a run's cells, from the driver (no torch here): each cell minimized
as a cell is run (harness.runtime.zygote's `Work`: a child forked from a zygote that has
warmed the cell's exporter up, under the memory ceiling a cell of the run got, killed past
its time bound), each script then run in a fresh process that cannot import the harness,
and the verdicts written into the records (`minimal_repro`, `artifacts.minimal_repro`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.repro.child import minimized
from harness.repro.job import Job, Summary
from harness.repro.select import kind_of
from harness.runtime.kept import ZygotePool
from harness.runtime.zygote import Work
from harness.store.amend import amend_records
from harness.store.records import Record
from harness.store.rundir import RunDirError, read_manifest

# Past the bound, the child gets this long to write what it found before it is killed:
# importing torch and the model's libraries, building and exporting the whole model
# once, and writing the script happen outside the search's own clock.
GRACE_S = 120.0
VERIFY_TIMEOUT_S = 300.0
SCRIPT_FILES = (
    "repro_min.py",
    "repro_min_inputs.pt",
    "repro_min_module.pt",
    "repro_min.onnx",
    "repro_min.onnx.data",
)
# The script runs with the harness made unimportable: a repro that needs it is no repro.
_WITHOUT_HARNESS = (
    "import runpy, sys; sys.modules['harness'] = None; path = sys.argv[1]; "
    "sys.argv = [path]; runpy.run_path(path, run_name='__main__')"
)


@dataclass(frozen=True)
class Made:
    record: Record  # with its minimal_repro
    summary: Summary


def make_repros(
    run_dir: Path,
    chosen: Sequence[Record],
    sources: Mapping[str, str],
    *,
    bound_s: float,
    jobs: int = 1,
    progress: Callable[[Made], None] = lambda made: None,
) -> list[Made]:
    """Minimize, verify and record each chosen cell, its record rewritten as it finishes
    (a run stopped half way keeps the repros it made)."""
    made: list[Made] = []
    where = Where(run_dir, ZygotePool(work_log(run_dir)), work_ceiling_gb(run_dir, jobs))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        try:
            futures = [pool.submit(_one, where, r, sources, bound_s) for r in chosen]
            for future in as_completed(futures):
                made.append(future.result())
                amend_records(run_dir, {made[-1].record.cell.key: made[-1].record})
                progress(made[-1])
        finally:
            where.zygotes.close()
    return sorted(made, key=lambda m: m.record.cell)


@dataclass(frozen=True)
class Where:
    """Where a run's cells are minimized: its directory, the zygotes the minimizers fork
    from, and the memory ceiling each gets."""

    run_dir: Path
    zygotes: ZygotePool
    ceiling_gb: float | None


def work_log(run_dir: Path) -> Path:
    """Where the zygotes of work on a run's cells (and that work) print."""
    return Path(tempfile.gettempdir()) / "harness-work" / f"{run_dir.name}-{os.getpid()}.log"


def work_ceiling_gb(run_dir: Path, jobs: int) -> float | None:
    """The memory ceiling of work on one of the run's cells: the one its cells got where
    the run set it (--max-memory-gb), else this machine's share per job."""
    from harness.store.environment import memory_share_gb

    try:
        ceiling = read_manifest(run_dir).max_memory_gb
    except RunDirError:
        ceiling = None
    return ceiling if ceiling is not None else memory_share_gb(jobs)


def _one(where: Where, record: Record, sources: Mapping[str, str], bound_s: float) -> Made:
    run_dir = where.run_dir
    start = time.monotonic()
    try:
        summary = _summary(where, record, sources, bound_s)
    except Exception as exc:  # the driver's own trouble (a disk full) is this cell's reason
        summary = Summary(
            kind_of(record) or "unknown", "none", reason=f"{type(exc).__name__}: {exc}"
        )
    wall = time.monotonic() - start
    summary = Summary.from_dict({**summary.to_dict(), "wall_s": round(wall, 2)})
    if summary.script:
        summary = verified(run_dir, summary)
    changed = record.with_changes(
        minimal_repro=summary.as_record(),
        artifacts={**_without_old(record.artifacts), **summary.artifacts()},
    )
    return Made(changed, summary)


def _without_old(artifacts: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in artifacts.items() if not k.startswith("minimal_repro")}


def _summary(where: Where, record: Record, sources: Mapping[str, str], bound_s: float) -> Summary:
    run_dir = where.run_dir
    kind = kind_of(record) or "unknown"
    source = sources.get(record.model)
    if source is None:
        return Summary(kind, "none", reason=f"model {record.model!r} is not in the zoo here")
    if record.variant != "base":
        reason = (
            f"the cell ran under variant {record.variant!r}; the minimizer runs in this environment"
        )
        return Summary(kind, "none", reason=reason)
    try:
        _clear_artifacts(run_dir, record)
    except ValueError as exc:
        return Summary(kind, "none", reason=str(exc))
    job = Job(record.to_dict(), source, str(run_dir.resolve()), bound_s)
    return _minimized(where, job, record, kind)


def _clear_artifacts(run_dir: Path, record: Record) -> None:
    """Remove an earlier repro from the cell's artifacts folder; never outside the run."""
    root = run_dir.resolve()
    folder = run_dir / "artifacts" / record.cell.cell_id
    if root not in folder.resolve().parents:
        raise ValueError(f"{folder} leads outside the run directory")
    for name in SCRIPT_FILES:
        old = folder / name
        if old.is_symlink() or old.is_file():
            old.unlink()


def _minimized(where: Where, job: Job, record: Record, kind: str) -> Summary:
    timeout_s = job.bound_s + GRACE_S
    work = Work(minimized, job, record.exporter, record.opset, timeout_s, where.ceiling_gb)
    done = where.zygotes.call(work)
    if done.value is not None:
        return done.value
    reason = f"the minimizer's process ended without a result: {done.failure} (its output: {where.zygotes.log})"
    return Summary(kind, "none", reason=reason)


def run_in_session(
    command: list[str], timeout_s: float, cwd: Path | None
) -> tuple[int | None, str, str]:
    """Run in a session of its own; past the timeout the whole group is killed. Returns
    the exit code (None when killed), its stdout and its stderr."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return None, out, err
    return proc.returncode, out, err


def _tail(out: str, err: str) -> str:
    lines = [ln for ln in (out + "\n" + err).splitlines() if ln.strip()]
    return "\n".join(lines[-3:])[-600:]


def verified(run_dir: Path, summary: Summary) -> Summary:
    """Run the script in a fresh process that cannot import the harness: it reproduces
    where it exits 1 and says REPRODUCED."""
    assert summary.script is not None
    script = run_dir / summary.script
    start = time.monotonic()
    command = [sys.executable, "-c", _WITHOUT_HARNESS, str(script.resolve())]
    code, out, err = run_in_session(command, VERIFY_TIMEOUT_S, cwd=script.parent)
    seconds = round(time.monotonic() - start, 2)
    for name in ("repro_min.onnx", "repro_min.onnx.data"):  # what the script exported
        (script.parent / name).unlink(missing_ok=True)
    verify: dict[str, Any] = {"exit_code": code, "seconds": seconds, "output": _tail(out, err)}
    reproduces = code == 1 and "REPRODUCED" in err
    return Summary.from_dict({**summary.to_dict(), "reproduces": reproduces, "verify": verify})


def default_jobs() -> int:
    return max(1, (os.cpu_count() or 1))
