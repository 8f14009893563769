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

from harness.store.details import Divergence
from harness.store.history import DB_SCHEMA, HistoryError
from harness.store.manifest import Manifest
from harness.store.records import Cell
from harness.store.status import Stage, Status

_FIELDS = (
    "family",
    "patch",
    "stage",
    "error_signature",
    "export_s",
    "export_peak_rss_mb",
    "ort_latency_ms.p50",
    "metadata",
    "artifacts",
    "first_divergence",
)
_RECORDS = (
    "SELECT run_id, model, exporter, opset, device, dynamic, variant, status, "
    + ", ".join(f"json_extract(record, '$.{f}')" for f in _FIELDS)
    + " FROM records ORDER BY run_id, model, exporter, opset, device, dynamic, variant"
)


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
    metadata: dict[str, Any] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)
    divergence: str | None = None


@dataclass(frozen=True)
class NightRun:
    """A run of the history, with its results (what a night of the site is made of)."""

    run_id: str
    started: str
    manifest: Manifest
    run_dir: str | None
    results: tuple[CellResult, ...]


def _number(value: object) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(float(value)) else None  # type: ignore[arg-type]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _object(value: object) -> dict[str, Any]:
    try:
        found = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _divergence(found: dict[str, Any]) -> str | None:
    try:
        return Divergence.from_dict(found).text() if found else None
    except (TypeError, ValueError):
        return None


def _result(row: tuple[Any, ...]) -> CellResult:
    run_id, model, exporter, opset, device, dynamic, variant, status, *rest = row
    family, patch, stage, signature, export_s, rss, p50, meta, artifacts, divergence = rest
    cell = Cell(
        str(model), str(exporter), int(opset), str(device), bool(dynamic), str(variant),
        family=_text(family) or "", patch=_text(patch) or "none",
    )  # fmt: skip
    found = _object(divergence)
    return CellResult(
        cell=cell,
        run_id=str(run_id),
        status=Status(status),
        stage=Stage(stage) if isinstance(stage, str) else None,
        error_signature=_text(signature),
        export_s=_number(export_s),
        export_peak_rss_mb=_number(rss),
        ort_p50_ms=_number(p50),
        metadata=_object(meta),
        artifacts={k: v for k, v in _object(artifacts).items() if isinstance(v, str)},
        divergence=_divergence(found),
    )


@contextmanager
def _read_only(db_path: Path) -> Iterator[sqlite3.Connection]:
    if not db_path.is_file():
        raise HistoryError(f"no history database at {db_path}")
    try:
        with closing(sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None or str(row[0]) != str(DB_SCHEMA):
                raise HistoryError(f"{db_path} has schema {row and row[0]}; this reads {DB_SCHEMA}")
            yield conn
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{db_path} is not a readable history database: {exc}") from None


def load_nights(db_path: Path) -> list[NightRun]:
    """Every run of the database with its results, oldest first; HistoryError names what
    is wrong with a database or one of its values."""
    with _read_only(db_path) as conn:
        runs = conn.execute("SELECT run_id, started, manifest, run_dir FROM runs").fetchall()
        results: dict[str, list[CellResult]] = {}
        for row in conn.execute(_RECORDS):
            try:
                results.setdefault(str(row[0]), []).append(_result(row))
            except (TypeError, ValueError) as exc:
                raise HistoryError(f"{db_path}: a record of run {row[0]!r}: {exc}") from None
    out = []
    for run_id, started, manifest, run_dir in runs:
        try:
            loaded = Manifest.from_dict(json.loads(manifest))
        except ValueError as exc:
            raise HistoryError(f"{db_path}: run {run_id!r}: {exc}") from None
        out.append(NightRun(run_id, started, loaded, run_dir, tuple(results.get(run_id, ()))))
    return sorted(out, key=lambda r: (r.started, r.run_id))
