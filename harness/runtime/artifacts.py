"""What a cell leaves in `artifacts/<cell>/`: on failure the error, a repro script and the
exporter's own report; with --keep-onnx the exported model."""

from __future__ import annotations

import os
import shutil
import traceback
from pathlib import Path

from harness.cell.stages import StageFailure
from harness.store.records import CellTask, Measurements


def artifacts_dir(task: CellTask) -> Path:
    return Path(task.run_dir) / "artifacts" / task.cell.cell_id


def keep_onnx(task: CellTask, path: Path, m: Measurements) -> None:
    """With --keep-onnx, copy the exported model (and its external data, as saved) into the
    cell's artifacts and name it there; a copy the disk refuses is left out, never the
    cell's own outcome."""
    if not task.keep_onnx or not path.is_file():
        return
    target = artifacts_dir(task)
    try:
        target.mkdir(parents=True, exist_ok=True)
        for f in path.parent.iterdir():
            shutil.copy2(f, target / f.name)
    except OSError:
        return
    m.artifacts["onnx"] = str((target / path.name).relative_to(task.run_dir))


def write_failure_artifacts(task: CellTask, failure: StageFailure) -> dict[str, str]:
    folder = artifacts_dir(task)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "error.txt").write_text(
        f"stage: {failure.stage}\n" + "".join(traceback.format_exception(failure.error))
    )
    (folder / "repro.py").write_text(_repro_script(task))
    found = {"error": folder / "error.txt", "repro": folder / "repro.py"}
    found.update({f"report:{p.name}": p for p in folder.glob("*.md")})
    return {k: os.path.relpath(p, task.run_dir) for k, p in found.items()}


def _repro_script(task: CellTask) -> str:
    c = task.cell
    return f'''"""Run {c.label()} again as its run did, in this process and without a run (the
harness installed); `harness repro` writes one that needs only torch: python repro.py"""
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask

task = CellTask(
    cell={c!r},
    source={task.source!r},
    run_id="repro",
    run_dir="repro-run",
    threads={task.threads!r},
)
record = run_cell(task)
print(record.status, record.stage, record.error_message)
'''
