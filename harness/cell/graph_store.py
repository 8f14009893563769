"""Keeping an ok cell's graph in the content-addressed store (harness/store/graphs.py):
written to a temporary folder beside the entry and renamed into place, so that workers
storing the same fingerprint at once leave one complete entry. The graph's files are
linked or copied, never loaded: a real-size model's weights are gigabytes, and its cell's
process still holds the model (loading Llama-3.2-1B's 4.9 GB here once took its cell past
its memory ceiling)."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import onnx

from harness.cell.graph import external_files
from harness.store.graphs import INPUTS, MODEL, artifact_path, entry_dir
from harness.store.records import CellTask, Measurements


def keep_graph(task: CellTask, path: Path, feeds: dict[str, np.ndarray], m: Measurements) -> None:
    """Store the model at `path` (with the data files it names) and its inputs under its
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
        _place_model(path, staging)
        np.savez(staging / INPUTS, **feeds)  # type: ignore[arg-type]  # numpy stubs: names
        staging.rename(entry)
    except OSError:
        if not (entry / MODEL).is_file():  # another worker's entry is as good as ours
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _place_model(path: Path, into: Path) -> None:
    """The model at `path` as `into/MODEL`, each external data file it names beside it
    under its name; a name that leads out of the model's folder, or that is one of the
    entry's own, keeps the graph out of the store (ValueError)."""
    names = external_files(onnx.load(str(path), load_external_data=False))
    odd = [name for name in names if not _plain_name(name)]
    if odd:
        raise ValueError(f"{path} keeps data in {odd[0]!r}, not a file beside it")
    for name in (*names, None):
        source = path if name is None else path.parent / name
        _link_or_copy(source, into / (name or MODEL))


def _plain_name(name: str) -> bool:
    return Path(name).name == name and name not in (MODEL, INPUTS, "", ".", "..")


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copyfile(source, target)
