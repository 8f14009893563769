"""Read a history database for the site, through the history's one reader
(harness.history.db.iter_lines): every run's manifest and, per record, the summary
columns the site shows (status, signature, export time and memory, ORT p50, graph
fingerprint, metadata, artifacts, divergence). Values are checked by the reader's column
kinds and here: the database is untrusted input, as the run directories it indexes."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.history import db as history
from harness.history.db import HistoryError
from harness.history.summary import BY_NAME, CELL_COLUMNS, COLUMNS, BadValue, cell_of
from harness.store.declare import read
from harness.store.details import Divergence
from harness.store.manifest import Manifest
from harness.store.measures import Generation, over_weights
from harness.store.records import Cell
from harness.store.status import Stage, Status
from harness.store.ways import SHAPES

# The site's columns: the cell (its model, exporter, family and axes), then what it shows
# of a record (in `_result`'s order).
_SHOWN = (
    "status",
    "stage",
    "error_signature",
    "export_s",
    "export_peak_rss_mb",
    "export_peak_cuda_mb",
    "ort_latency_ms.p50",
    "graph_fingerprint",
    "metadata",
    "artifacts",
    "first_divergence",
    "weights_mb",
    "exporter_speed",
    "onnx_bytes",
    "onnx_nodes",
    "shape_latency",
    "generation",
    "generations",
)
_AXES = CELL_COLUMNS
_COLUMNS = (*COLUMNS[:CELL_COLUMNS], *(BY_NAME[k] for k in _SHOWN))
_STATUSES = {s.value: s for s in Status}
_STAGES = {s.value: s for s in Stage}


@dataclass(slots=True)
class CellResult:
    """What the site needs of one record. Not frozen, by measure: a frozen dataclass's
    `__init__` costs 7 times a plain one's (7.7 against 1.0 us on the shared 2-core machine),
    and a site of two channels makes a million of these; nothing changes one once made."""

    cell: Cell
    run_id: str
    status: Status
    stage: Stage | None = None
    error_signature: str | None = None
    export_s: float | None = None
    export_peak_rss_mb: float | None = None
    export_peak_cuda_mb: float | None = None  # a CUDA cell's, on the device
    ort_p50_ms: float | None = None
    graph: str | None = None  # the graph's fingerprint (harness.store.graphs)
    dtype: str = ""  # the record's metadata (an OpInfo cell's dtype, a task)
    task: str = ""
    opinfo: str = ""
    suite: str = "(no suite)"  # the run's
    artifacts: dict[str, str] = field(default_factory=dict)
    divergence: str | None = None
    memory_over_weights: float | None = None  # export peak RSS / the weights' bytes
    cuda_over_weights: float | None = None  # export peak CUDA memory / the weights' bytes
    vs_fastest: float | None = None  # ORT p50 / the fastest exporter's graph's (paired)
    graph_bytes: int | None = None  # the side by side of every way (harness.store.ways)
    nodes: int | None = None
    p50_by_shape: dict[str, float] = field(default_factory=dict)  # prefill, decode_step
    generation: Generation | None = None
    generations: dict[str, Generation] = field(default_factory=dict)


@dataclass(frozen=True)
class NightRun:
    """A run of the history, with its results (what a night of the site is made of)."""

    run_id: str
    started: str
    manifest: Manifest
    run_dir: str | None
    results: tuple[CellResult, ...]


def _text(value: object) -> str:
    return value if type(value) is str else ""


def _object(text: str | None) -> dict[str, Any]:
    """A JSON object column (the reader checked that it parses); anything else is empty."""
    found = json.loads(text) if text is not None else None
    return found if isinstance(found, dict) else {}


def _divergence(found: dict[str, object]) -> str | None:
    try:
        return Divergence.from_dict(found).text() if found else None
    except (TypeError, ValueError):
        return None


def _result(
    row: tuple[Any, ...],
    suite: str,
    cells: dict[tuple[object, ...], tuple[Cell, str]],
    newest: bool,
) -> CellResult:
    """A row of `_COLUMNS` (run id first), of its columns' kinds, as the site's result. The
    artifacts and first divergence of the newest night's failures only (what the site links
    to): parsing JSON is what costs, 2 of a channel's 14 s over 90 nights."""
    axes = row[1 : _AXES + 1]
    status, stage, signature, export_s, rss, cuda, p50, graph, *more = row[_AXES + 1 :]
    metadata, artifacts, divergence, weights, speed, *ways = more
    if status not in _STATUSES or (stage is not None and stage not in _STAGES):
        raise ValueError(f"status {status!r}, stage {stage!r}: not a status and stage this reads")
    found = cells.get(axes)
    if found is None:  # one Cell per cell, not per night: 500 000 rows, 5 600 cells
        cell = cell_of(axes)
        found = cells[axes] = (cell, cell.dtype.value if cell.dtype.reduced else "")
    cell, dtype = found
    shown = _object(metadata) if metadata is not None else {}
    details = newest and not _STATUSES[status].passing
    return CellResult(
        cell,
        row[0],
        _STATUSES[status],
        _STAGES[stage] if stage is not None else None,
        signature,
        export_s,
        rss,
        cuda,
        p50,
        graph,
        _text(shown.get("dtype")) or dtype,
        _text(shown.get("task")),
        _text(shown.get("opinfo")),
        suite,
        {k: v for k, v in _object(artifacts).items() if isinstance(v, str)}
        if details and artifacts is not None
        else {},
        _divergence(_object(divergence)) if details and divergence is not None else None,
        over_weights(rss, weights),
        over_weights(cuda, weights),
        _ratio(_object(speed).get("ratio")) if speed is not None else None,
        *_ways(*ways),
    )


def _ratio(value: object) -> float | None:
    return float(value) if isinstance(value, float | int) and not isinstance(value, bool) else None


def _ways(
    graph_bytes: int | None,
    nodes: int | None,
    shapes: str | None,
    generation: str | None,
    generations: str | None,
) -> tuple[int | None, int | None, dict[str, float], Generation | None, dict[str, Generation]]:
    """A generative cell's side-by-side figures (null outside generative cells: no JSON to
    parse for most rows)."""
    p50s = {
        name: p50
        for name, shape in _object(shapes).items()
        if name in SHAPES
        and isinstance(shape, dict)
        and isinstance(p50 := (shape.get("ort_latency_ms") or {}).get("p50"), float | int)
    }
    one = read(Generation, _object(generation)) if generation is not None else None
    more = dict(read(dict[str, Generation], _object(generations))) if generations else {}
    return graph_bytes, nodes, p50s, one, more


def _manifests(conn: sqlite3.Connection, db_path: Path) -> list[tuple[str, str, Manifest, str]]:
    out = []
    for run_id, started, manifest, run_dir in conn.execute(
        "SELECT run_id, started, manifest, run_dir FROM runs"
    ):
        try:
            loaded = Manifest.from_dict(json.loads(manifest))
        except ValueError as exc:
            raise HistoryError(f"{db_path}: run {run_id!r}: {exc}") from None
        out.append((str(run_id), str(started), loaded, run_dir))
    return out


def load_nights(db_path: Path) -> list[NightRun]:
    """Every run of the database with its results, oldest first; HistoryError names what
    is wrong with a database or one of its values. An older database is migrated first."""
    with history.opened(db_path) as conn:
        runs = _manifests(conn, db_path)
        suites = {run_id: m.suite or "(no suite)" for run_id, _, m, _ in runs}
        day = max((started[:10] for _, started, _, _ in runs), default="")
        newest = {run_id for run_id, started, _, _ in runs if started[:10] == day}
        results: dict[str, list[CellResult]] = {}
        cells: dict[tuple[object, ...], tuple[Cell, str]] = {}  # a cell, its dtype's label
        run_id = ""
        try:
            for row in history.iter_rows(conn, _COLUMNS):
                run_id = row[0]
                found = _result(row, suites.get(run_id, "(no suite)"), cells, run_id in newest)
                results.setdefault(run_id, []).append(found)
        except (BadValue, TypeError, ValueError) as exc:
            raise HistoryError(f"{db_path}: a record of run {run_id!r}: {exc}") from None
    out = [
        NightRun(run_id, started, m, run_dir, tuple(results.get(run_id, ())))
        for run_id, started, m, run_dir in runs
    ]
    return sorted(out, key=lambda r: (r.started, r.run_id))
