"""Read a history database for the site: every run's manifest and, per record, only the
fields the site shows (status, signature, export time and memory, ORT p50, metadata,
artifacts), pulled out by SQLite's json_extract. A record keeps every latency sample
(hundreds of KB for a fast model): parsing whole records costs 0.4-20 ms each, hours for
90 nights of the nightly (benchmarks/test_publish.py). Values are validated here: the
database is untrusted input, as the run directories it indexes."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.store.declare import Malformed, read
from harness.store.details import Divergence
from harness.store.history import DB_SCHEMA, HistoryError
from harness.store.manifest import Manifest
from harness.store.measures import Generation
from harness.store.records import Cell, Dtype, OrtOpt
from harness.store.status import Stage, Status

_PASSING = ", ".join(f"'{s.value}'" for s in Status if s.passing)
_SCALARS = (
    "family",
    "patch",
    "stage",
    "error_signature",
    "export_s",
    "export_peak_rss_mb",
    "ort_latency_ms.p50",
    "metadata.dtype",
    "metadata.task",
    "metadata.opinfo",
    "dtype",
    "ort_opt",
    # the side by side of every way (harness.store.ways): graph figures, the named shapes'
    # ORT p50, and the token checks (small objects, null outside generative cells)
    "onnx_bytes",
    "onnx_nodes",
    "shape_latency.prefill.ort_latency_ms.p50",
    "shape_latency.decode_step.ort_latency_ms.p50",
    "generation",
    "generations",
)
# The artifacts and first divergence of the newest night's failures only (what the site
# links to): most cells pass, and parsing JSON objects in Python is what costs
# (benchmarks/test_publish.py). The parameter is the newest night's date.
_ON_FAILURE = ("artifacts", "first_divergence")
_NEWEST = "run_id IN (SELECT run_id FROM runs WHERE substr(started, 1, 10) = ?)"
_RECORDS = (
    "SELECT run_id, model, exporter, opset, device, dynamic, variant, status, "
    + ", ".join(f"json_extract(record, '$.{f}')" for f in _SCALARS)
    + ", "
    + ", ".join(
        f"CASE WHEN status NOT IN ({_PASSING}) AND {_NEWEST} THEN json_extract(record, '$.{f}') END"
        for f in _ON_FAILURE
    )
    + " FROM records"
)
_STATUSES = {s.value: s for s in Status}
_STAGES = {s.value: s for s in Stage}


@dataclass(frozen=True)
class CellResult:
    """What the site needs of one record."""

    cell: Cell
    run_id: str
    status: Status
    stage: Stage | None = None
    error_signature: str | None = None
    export_s: float | None = None
    export_peak_rss_mb: float | None = None
    ort_p50_ms: float | None = None
    dtype: str = ""  # the record's metadata (an OpInfo cell's dtype, a task)
    task: str = ""
    opinfo: str = ""
    suite: str = "(no suite)"  # the run's
    artifacts: dict[str, str] = field(default_factory=dict)
    divergence: str | None = None
    graph_bytes: int | None = None
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


def _number(value: object) -> float | None:
    if type(value) is float:  # the common case first: 400 000 rows a site (benchmarks/)
        return value if math.isfinite(value) else None
    return float(value) if type(value) is int else None


def _text(value: object) -> str | None:
    return value if type(value) is str else None


def _object(value: object) -> dict[str, object]:
    if value is None:
        return {}
    try:
        found = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _divergence(found: dict[str, object]) -> str | None:
    try:
        return Divergence.from_dict(found).text() if found else None
    except (TypeError, ValueError):
        return None


def _result(row: tuple[Any, ...], suite: str, cells: dict[tuple[object, ...], Cell]) -> CellResult:
    run_id, model, exporter, opset, device, dynamic, variant, status, *rest = row
    family, patch, stage, signature, export_s, rss, p50, dtype, task, opinfo, *more = rest
    cell_dtype, cell_ort_opt, graph_bytes, nodes, prefill, decode, tokens, more_tokens, *last = more
    artifacts, divergence = last
    if status not in _STATUSES or (stage is not None and stage not in _STAGES):
        raise ValueError(f"status {status!r}, stage {stage!r}: not a status and stage this reads")
    key = (
        model,
        exporter,
        opset,
        device,
        dynamic,
        variant,
        family,
        patch,
        cell_dtype,
        cell_ort_opt,
    )
    cell = cells.get(key)
    if cell is None:  # one Cell per cell, not per night: 200 000 rows, 2 262 cells
        cell = cells[key] = Cell(
            str(model), str(exporter), int(opset), str(device), bool(dynamic), str(variant),
            family=_text(family) or "", patch=_text(patch) or "none",
            dtype=Dtype(_text(cell_dtype) or Dtype.FLOAT32),
            ort_opt=OrtOpt(_text(cell_ort_opt) or OrtOpt.DEFAULT),
        )  # fmt: skip
    return CellResult(
        cell=cell,
        run_id=str(run_id),
        status=_STATUSES[status],
        stage=_STAGES.get(stage) if stage is not None else None,
        error_signature=_text(signature),
        export_s=_number(export_s),
        export_peak_rss_mb=_number(rss),
        ort_p50_ms=_number(p50),
        dtype=_text(dtype) or (cell.dtype.value if cell.dtype.reduced else ""),
        task=_text(task) or "",
        opinfo=_text(opinfo) or "",
        suite=suite,
        artifacts={k: v for k, v in _object(artifacts).items() if isinstance(v, str)}
        if artifacts is not None
        else {},
        divergence=_divergence(_object(divergence)) if divergence is not None else None,
        graph_bytes=_count(graph_bytes),
        nodes=_count(nodes),
        p50_by_shape={
            k: v
            for k, raw in (("prefill", prefill), ("decode_step", decode))
            if (v := _number(raw)) is not None
        },
        generation=_generation(tokens) if tokens is not None else None,
        generations=_generations(more_tokens) if more_tokens is not None else {},
    )


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _generation(value: object) -> Generation | None:
    found = _object(value)
    return read(Generation, found) if found else None  # type: ignore[no-any-return]


def _generations(value: object) -> dict[str, Generation]:
    found = read(dict[str, Generation], _object(value))
    return dict(found)


@contextmanager
def _read_only(db_path: Path) -> Iterator[sqlite3.Connection]:
    if not db_path.is_file():
        raise HistoryError(f"no history database at {db_path}")
    try:
        with closing(sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            # Read the pages in place: a third less time on the benchmark's 0.9 GB history.
            conn.execute("PRAGMA mmap_size = 1073741824")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None or str(row[0]) != str(DB_SCHEMA):
                raise HistoryError(f"{db_path} has schema {row and row[0]}; this reads {DB_SCHEMA}")
            yield conn
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{db_path} is not a readable history database: {exc}") from None


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
    is wrong with a database or one of its values."""
    with _read_only(db_path) as conn:
        runs = _manifests(conn, db_path)
        suites = {run_id: m.suite or "(no suite)" for run_id, _, m, _ in runs}
        newest = max((started[:10] for _, started, _, _ in runs), default="")
        results: dict[str, list[CellResult]] = {}
        cells: dict[tuple[object, ...], Cell] = {}
        for row in conn.execute(_RECORDS, (newest,) * len(_ON_FAILURE)):
            try:
                found = _result(row, suites.get(row[0], "(no suite)"), cells)
            except (TypeError, ValueError, Malformed) as exc:
                raise HistoryError(f"{db_path}: a record of run {row[0]!r}: {exc}") from None
            results.setdefault(found.run_id, []).append(found)
    out = [
        NightRun(run_id, started, m, run_dir, tuple(results.get(run_id, ())))
        for run_id, started, m, run_dir in runs
    ]
    return sorted(out, key=lambda r: (r.started, r.run_id))
