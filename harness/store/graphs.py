"""The graph store: the ok cells' ONNX models, content-addressed by graph fingerprint, so
that `harness compare` can time a baseline's and a candidate's graphs together later.

    STORE/<fp[:2]>/<fp>/model.onnx        the graph as the exporter saved it, and the
    STORE/<fp[:2]>/<fp>/<its data files>  external data files it names (linked or copied)
    STORE/<fp[:2]>/<fp>/inputs.npz        the inputs it was timed on, by graph input name

STORE is `<run>/graphs/` (`harness run --keep-graphs`) or a folder shared by runs
(`--keep-graphs DIR`, the nightly's `nightly/graphs/`): an unchanged graph is stored once.
A record names its entry in `artifacts["graph"]`, relative to the run directory."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from harness.store.records import Record

MODEL = "model.onnx"
INPUTS = "inputs.npz"
RUN_STORE = "graphs"


def entry_dir(store: Path, fingerprint: str) -> Path:
    return store / fingerprint[:2] / fingerprint


def artifact_path(run_dir: Path, model: Path) -> str:
    """How a record names a stored model: relative to the run directory, also where the
    store is beside it (`../graphs/...`), so a run and its store move together (the
    nightly's artifact unpacks both elsewhere)."""
    return os.path.relpath(model.resolve(), run_dir.resolve())


def stored_model(run_dir: Path | None, record: Record) -> Path | None:
    """The stored model of `record`, if it was kept and is still there."""
    name = record.artifacts.get("graph")
    if not name or record.export.graph_fingerprint is None:
        return None
    path = Path(name) if os.path.isabs(name) or run_dir is None else run_dir / name
    return path if path.is_file() and (path.parent / INPUTS).is_file() else None


def store_size(store: Path) -> tuple[int, int]:
    """(entries, bytes) of a store."""
    entries = [d for d in store.glob("*/*") if (d / MODEL).is_file()]
    size = sum(f.stat().st_size for d in entries for f in d.iterdir() if f.is_file())
    return len(entries), size


def prune(store: Path, keep: Iterable[str]) -> int:
    """Remove the entries whose fingerprint is not in `keep` (the nightly keeps what its
    latest runs reference); returns how many were removed."""
    wanted, removed = set(keep), 0
    for entry in store.glob("*/*"):
        if entry.is_dir() and entry.name not in wanted:
            shutil.rmtree(entry, ignore_errors=True)
            removed += 1
    return removed


def referenced(records: Iterable[Record]) -> set[str]:
    return {
        r.export.graph_fingerprint
        for r in records
        if r.export.graph_fingerprint and r.artifacts.get("graph")
    }


def seed(store: Path, previous: Path) -> int:
    """Link (or copy) the entries of an earlier store into `store`, so that a run adds only
    the graphs that changed; returns how many were added."""
    added = 0
    for entry in previous.glob("*/*"):
        target = store / entry.parent.name / entry.name
        if not (entry / MODEL).is_file() or target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copytree(entry, target, copy_function=os.link)
        except OSError:
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(entry, target)
        added += 1
    return added
