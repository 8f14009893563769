"""The history database: past runs in SQLite, for noise-scaled thresholds and trend plots.

The database is an index, never the only copy: each run keeps its run directory's path and
its records' JSON, and `rebuild` recreates the file from run directories. Runs are keyed
by a comparability key (hardware, threads, measurement protocol: what must match for two
runs' numbers to mean the same), records by cell.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.store.manifest import Manifest
from harness.store.records import Record
from harness.store.runs import Run, comparability, read_run

DEFAULT_DB = Path("results/history.sqlite")
DB_SCHEMA = 2  # 2: records keyed by the run and the cell's id (patch, dtype, ORT optimisation)

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    finished TEXT,
    suite TEXT,
    run_dir TEXT NOT NULL,
    comparability_key TEXT NOT NULL,
    comparability TEXT NOT NULL,
    torch TEXT, onnx TEXT, onnxscript TEXT, onnxruntime TEXT,
    versions TEXT NOT NULL,
    manifest TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_by_key ON runs (comparability_key, started);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT NOT NULL,
    cell TEXT NOT NULL,
    model TEXT NOT NULL, exporter TEXT NOT NULL, opset INTEGER NOT NULL,
    device TEXT NOT NULL, dynamic INTEGER NOT NULL, variant TEXT NOT NULL,
    status TEXT NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (run_id, cell)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS records_by_cell ON records (model, exporter, opset, device, dynamic, variant);
"""


class HistoryError(Exception):
    """A history database that is missing, unreadable or newer than this harness."""


@dataclass(frozen=True)
class HistoryRun:
    """One run as the history database holds it (the plots and reports read these)."""

    run_id: str
    started: str
    manifest: Manifest
    records: list[Record]
    run_dir: str | None = None

    def as_run(self) -> Run:
        return Run(manifest=self.manifest, records=tuple(self.records), path=self.run_dir)


@dataclass(frozen=True)
class RunSummary:
    """A row of `harness history list`."""

    run_id: str
    started: str
    suite: str | None
    torch: str | None
    comparability_key: str
    cells: int
    ok: int
    run_dir: str


def comparability_key(manifest: Manifest) -> str:
    """A short stable hash of `compare.comparability(manifest)`."""
    canonical = json.dumps(comparability(manifest), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# -- the connection ---------------------------------------------------------------------------


@contextmanager
def _connect(db_path: Path, *, create: bool) -> Iterator[sqlite3.Connection]:
    if not create and not db_path.is_file():
        raise HistoryError(
            f"no history database at {db_path} (create it with `harness history add RUN_DIR`)"
        )
    db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with closing(sqlite3.connect(db_path)) as conn:
            _check_schema(conn, db_path, create=create)
            with conn:
                yield conn
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{db_path} is not a readable history database: {exc}") from None


def _check_schema(conn: sqlite3.Connection, db_path: Path, *, create: bool) -> None:
    if create:
        conn.executescript(_TABLES)
        conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(DB_SCHEMA),))
        conn.commit()
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    if row is not None and row[0] == "1":
        _update_to_2(conn)
        row = (str(DB_SCHEMA),)
    if row is None or int(row[0]) > DB_SCHEMA:
        found = row[0] if row else None
        raise HistoryError(
            f"{db_path} has schema {found}; this harness reads {DB_SCHEMA}, upgrade it or rebuild the database"
        )


def _update_to_2(conn: sqlite3.Connection) -> None:
    """Schema 1 keyed a record by (run, model, exporter, opset, device, shapes, variant),
    which two cells of one run share where they differ in patch, dtype or ORT optimisation
    (the second one's ingestion failed); schema 2 keys it by the run and the cell's id."""
    old = conn.execute(
        "SELECT run_id, model, exporter, opset, device, dynamic, variant, status, record FROM records"
    ).fetchall()
    with conn:
        conn.execute("DROP TABLE records")
        conn.executescript(_TABLES)
        rows = [(r[0], Record.from_json(r[-1]).cell.cell_id, *r[1:]) for r in old]
        conn.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(DB_SCHEMA),))


# -- writing ------------------------------------------------------------------------------------


def _run_row(run: Run, run_dir: Path) -> tuple[str | None, ...]:
    m, written = run.manifest, run.manifest.to_dict()
    base = run.versions("base")
    return (
        run.run_id,
        run.started,
        m.finished,
        m.suite,
        str(run_dir.resolve()),
        comparability_key(m),
        json.dumps(comparability(m), sort_keys=True),
        base.get("torch"),
        base.get("onnx"),
        base.get("onnxscript"),
        base.get("onnxruntime"),
        json.dumps(written["versions"], sort_keys=True),
        json.dumps(written, sort_keys=True),
    )


def _record_row(run_id: str, r: Record) -> tuple[str | int, ...]:
    return (
        run_id,
        r.cell.cell_id,
        r.model,
        r.exporter,
        r.opset,
        r.device,
        int(r.dynamic),
        r.variant,
        r.status,
        r.to_json(),
    )


def _insert(conn: sqlite3.Connection, run: Run, run_dir: Path) -> None:
    conn.execute("DELETE FROM records WHERE run_id = ?", (run.run_id,))
    conn.execute(
        "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", _run_row(run, run_dir)
    )
    rows = [_record_row(run.run_id, r) for r in run.by_cell().values()]
    conn.executemany("INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?,?)", rows)


def add_runs(db_path: Path, run_dirs: Sequence[Path]) -> list[Run]:
    """Ingest run directories (a run already there is replaced). RunDirError propagates."""
    runs = [read_run(d) for d in run_dirs]
    with _connect(db_path, create=True) as conn:
        for run, run_dir in zip(runs, run_dirs, strict=True):
            _insert(conn, run, run_dir)
    return runs


def rebuild(db_path: Path, run_dirs: Sequence[Path]) -> list[Run]:
    """Recreate the database from run directories alone, replacing the old file atomically."""
    tmp = db_path.with_name(db_path.name + ".rebuild")
    tmp.unlink(missing_ok=True)
    try:
        runs = add_runs(tmp, run_dirs)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, db_path)
    return runs


# -- reading ------------------------------------------------------------------------------------

_RUN_COLUMNS = "run_id, started, manifest, run_dir"


def _load(conn: sqlite3.Connection, rows: list[tuple[str, str, str, str]]) -> list[HistoryRun]:
    runs = []
    for run_id, started, manifest, run_dir in rows:
        lines = conn.execute(
            "SELECT record FROM records WHERE run_id = ? ORDER BY model, exporter, opset, device, dynamic, variant, cell",
            (run_id,),
        )
        try:
            records = [Record.from_json(line) for (line,) in lines]
            loaded = Manifest.from_dict(json.loads(manifest))
        except ValueError as exc:  # SchemaError, Malformed, JSONDecodeError
            raise HistoryError(f"run {run_id} in the history: {exc}") from None
        runs.append(HistoryRun(run_id, started, loaded, records, run_dir))
    return runs


def load_runs(db_path: Path, *, limit: int | None = None) -> list[HistoryRun]:
    """Every run in the database (or the `limit` most recent), oldest first."""
    with _connect(db_path, create=False) as conn:
        query = f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY started DESC, run_id DESC"
        rows = conn.execute(
            query + (" LIMIT ?" if limit is not None else ""), (() if limit is None else (limit,))
        ).fetchall()
        return _load(conn, rows[::-1])


def load_comparable(db_path: Path, manifest: Manifest, *, last: int) -> list[HistoryRun]:
    """The `last` runs comparable with `manifest` that started before it, oldest first
    (the run itself excluded, so a candidate already ingested is not its own baseline)."""
    with _connect(db_path, create=False) as conn:
        rows = conn.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE comparability_key = ? AND started < ? AND run_id != ? ORDER BY started DESC, run_id DESC LIMIT ?",
            (
                comparability_key(manifest),
                manifest.started or "",
                str(manifest.run_id),
                last,
            ),
        ).fetchall()
        return _load(conn, rows[::-1])


def count_other_keys(db_path: Path, manifest: Manifest) -> int:
    """How many runs in the database have another comparability key (for error messages)."""
    with _connect(db_path, create=False) as conn:
        row = conn.execute(
            "SELECT COUNT(*) FROM runs WHERE comparability_key != ?", (comparability_key(manifest),)
        ).fetchone()
        return int(row[0])


def list_runs(db_path: Path) -> list[RunSummary]:
    """A summary of every run, oldest first."""
    with _connect(db_path, create=False) as conn:
        rows = conn.execute(
            "SELECT r.run_id, r.started, r.suite, r.torch, r.comparability_key, COUNT(c.run_id), "
            "COALESCE(SUM(c.status = 'ok'), 0), r.run_dir FROM runs r LEFT JOIN records c ON c.run_id = r.run_id "
            "GROUP BY r.run_id ORDER BY r.started, r.run_id"
        ).fetchall()
    return [RunSummary(*row) for row in rows]


def dump(db_path: Path) -> list[tuple[object, ...]]:
    """Every row of every table in a stable order: equal dumps mean equal content."""
    with _connect(db_path, create=False) as conn:
        rows: list[tuple[object, ...]] = []
        for table in ("meta", "runs", "records"):
            rows.extend(
                (table, *row)
                for row in conn.execute(
                    f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4, 5, 6, 7"
                    if table == "records"
                    else f"SELECT * FROM {table} ORDER BY 1"
                )
            )
        return rows
