"""Keeping an ok cell's graph in the content-addressed store (harness/store/graphs.py):
written to a temporary folder beside the entry and renamed into place, so that workers
storing the same fingerprint at once leave one complete entry."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import numpy as np
import onnx

from harness.store.graphs import INPUTS, MODEL, artifact_path, entry_dir
from harness.store.records import CellTask, Measurements


def keep_graph(task: CellTask, path: Path, feeds: dict[str, np.ndarray], m: Measurements) -> None:
    """Store the model at `path` (weights as external data) and its inputs under its
    fingerprint, unless an entry is already there; name it in the record's artifacts."""
    if not task.graph_store or m.export.graph_fingerprint is None:
        return
    entry = entry_dir(Path(task.graph_store), m.export.graph_fingerprint)
    try:
        if not (entry / MODEL).is_file():
            _write_entry(entry, path, feeds)
    except Exception:  # a full disk loses the re-measurement, never the cell's result
        return
    m.artifacts["graph"] = artifact_path(Path(task.run_dir), entry / MODEL)


def _write_entry(entry: Path, path: Path, feeds: dict[str, np.ndarray]) -> None:
    staging = entry.parent / f".{entry.name}.{uuid.uuid4().hex}"
    staging.mkdir(parents=True)
    try:
        model = onnx.load(str(path), load_external_data=True)
        onnx.save_model(
            model,
            str(staging / MODEL),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=MODEL + ".data",
            size_threshold=1024,
        )
        np.savez(staging / INPUTS, **feeds)  # type: ignore[arg-type]  # numpy stubs: names
        staging.rename(entry)
    except OSError:
        if not (entry / MODEL).is_file():  # another worker's entry is as good as ours
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
