"""The history database: past runs in SQLite, for noise-scaled thresholds and trend plots.

The database is an index, never the only copy: each run keeps its run directory's path,
and each record its summary columns (harness.history.summary: the cell's axes, status,
signature, export figures, each latency's statistics): the latency samples stay in the run
directory, which `HistoryRun.in_full` reads back. `rebuild` recreates the file from run
directories. Runs are keyed
by a comparability key (hardware, threads, measurement protocol: what must match for two
runs' numbers to mean the same), records by cell.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from harness.history import schema
from harness.history.summary import (
    COLUMNS,
    BadValue,
    Column,
    line_of,
    record_of,
    row_of_record,
    summarize_line,
)
from harness.store import rundir
from harness.store.manifest import JsonValue, Manifest
from harness.store.records import CellKey, Record
from harness.store.rundir import RunDirError, read_manifest, records_path
from harness.store.runs import Run, comparability, read_run

DEFAULT_DB = Path("results/history.sqlite")
DB_SCHEMA = schema.DB_SCHEMA


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
        """The run as the history keeps it: each record's summary (harness.history.summary)."""
        return Run(manifest=self.manifest, records=tuple(self.records), path=self.run_dir)

    def in_full(self) -> tuple[Run, str | None]:
        """The run as its directory holds it (latency samples, numerics, op tables), or the
        summary and one line saying why not (the directory gone, unreadable, another run)."""
        where = self.run_dir or "(no directory recorded)"
        try:
            full = read_run(Path(where))
        except RunDirError as exc:
            return self.as_run(), f"run {self.run_id}: {exc}; its summary is compared"
        if full.run_id != self.run_id:
            why = f"run {self.run_id}: {where} now holds run {full.run_id}; its summary is compared"
            return self.as_run(), why
        return full, None


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
    return _hashed(comparability(manifest))


def comparable_keys(manifest: Manifest) -> tuple[str, str]:
    """The keys of the runs comparable with `manifest`: its own, and that of the runs alike
    but for the CPU identity they did not record (written before the manifest said it)."""
    found = comparability(manifest)
    return _hashed(found), _hashed({k: v for k, v in found.items() if k != "cpu_id"})


def _hashed(comparable: dict[str, JsonValue]) -> str:
    canonical = json.dumps(comparable, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


# -- the connection ---------------------------------------------------------------------------


@contextmanager
def _connect(db_path: Path, *, create: bool) -> Iterator[sqlite3.Connection]:
    """The database, its schema brought up to date in place (an older one migrated, the
    columns of a newer harness added); a write cut short was rolled back by SQLite."""
    if not create and not db_path.is_file():
        raise HistoryError(
            f"no history database at {db_path} (create it with `harness history add RUN_DIR`)"
        )
    db_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
            # Read the pages in place: a third less time on a large history.
            conn.execute("PRAGMA mmap_size = 1073741824")
            _check_schema(conn, db_path, create=create)
            conn.execute("BEGIN")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
    except sqlite3.DatabaseError as exc:
        raise HistoryError(f"{db_path} is not a readable history database: {exc}") from None


def opened(db_path: Path) -> contextlib.AbstractContextManager[sqlite3.Connection]:
    """An existing history database, up to date, for `iter_lines` (the site's reader)."""
    return _connect(db_path, create=False)


def _check_schema(conn: sqlite3.Connection, db_path: Path, *, create: bool) -> None:
    found = schema.version(conn)
    if found is None and create:
        schema.create(conn)
        found = str(DB_SCHEMA)
    if found in ("1", "2"):
        try:
            schema.to_current(conn, int(found))
        except (TypeError, ValueError) as exc:  # a record no harness wrote: left as it was
            raise HistoryError(f"{db_path}: schema {found} cannot be migrated: {exc}") from None
        found = str(DB_SCHEMA)
    if found is None or not found.isdigit() or int(found) > DB_SCHEMA:
        raise HistoryError(
            f"{db_path} has schema {found}; this harness reads {DB_SCHEMA}, upgrade it or rebuild the database"
        )
    schema.add_new_columns(conn)


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


INSERT_RECORD = (
    f"INSERT INTO records (run_id, cell, {', '.join(c.quoted for c in COLUMNS)}) "
    f"VALUES (?, ?, {', '.join('?' for _ in COLUMNS)})"
)


def _insert(conn: sqlite3.Connection, run: Run, run_dir: Path) -> None:
    conn.execute("DELETE FROM records WHERE run_id = ?", (run.run_id,))
    conn.execute(
        "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", _run_row(run, run_dir)
    )
    rows = [(run.run_id, r.cell.cell_id, *row_of_record(r)) for r in run.by_cell().values()]
    conn.executemany(INSERT_RECORD, rows)


def read_summaries(run_dir: Path) -> Run:
    """A run directory as the history keeps it: each record's summary, checked as a record
    is, its samples neither validated nor kept (a night of every suite is 116 MB of
    records.jsonl, most of it samples). RunDirError names the file and line of a bad one."""
    manifest = read_manifest(run_dir)
    records: dict[CellKey, Record] = {}  # a repeated cell (a resumed run): its last record
    for number, line in rundir.iter_lines(run_dir):
        try:
            record = summarize_line(line)
        except (KeyError, TypeError, ValueError) as exc:  # SchemaError, Malformed
            raise RunDirError(f"{records_path(run_dir)}:{number}: {exc}") from None
        records[record.cell.key] = record
    return Run(manifest, tuple(records.values()), str(run_dir))


def add_runs(db_path: Path, run_dirs: Sequence[Path]) -> list[Run]:
    """Ingest run directories (a run already there is replaced), all or none of them.
    RunDirError propagates."""
    runs = [read_summaries(d) for d in run_dirs]
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


def _check(
    conn: sqlite3.Connection, columns: Sequence[Column], where: str, params: Sequence[object]
) -> None:
    """BadValue naming the first row and column of `columns` whose value no writer stores:
    one scan in SQLite, so that the rows are read without a check per value in Python."""
    wrong = [c for c in columns if c.name in schema.columns_of(conn)]
    if not wrong:
        return
    which = " ".join(f"WHEN {c.wrong} THEN {i}" for i, c in enumerate(wrong))
    condition = " OR ".join(c.wrong for c in wrong)
    where = f"{where} AND ({condition})" if where else f"WHERE {condition}"
    found = conn.execute(
        f"SELECT run_id, cell, CASE {which} END FROM records {where} LIMIT 1", tuple(params)
    ).fetchone()
    if found is not None:
        column = wrong[int(found[2])]
        value = conn.execute(
            f"SELECT {column.quoted} FROM records WHERE run_id = ? AND cell = ?", found[:2]
        ).fetchone()[0]
        raise BadValue(
            f"run {found[0]!r}, cell {found[1]!r}: column {column.name!r} holds "
            f"{value!r:.60}, not a {column.kind} value"
        )


def iter_rows(
    conn: sqlite3.Connection,
    columns: Sequence[Column],
    where: str = "",
    params: Sequence[object] = (),
    order: str = "",
) -> Iterator[tuple[Any, ...]]:
    """The one reader of the records: (run id, the values of `columns`) per row, each
    value of its column's kind (checked first, in SQLite) or None; a column the database
    predates reads as NULL. BadValue names a value no writer stores."""
    _check(conn, columns, where, params)
    present = schema.columns_of(conn)
    select = ", ".join(c.quoted if c.name in present else "NULL" for c in columns)
    query = f"SELECT run_id, {select} FROM records {where} {order}"
    return iter(conn.execute(query, tuple(params)))  # the cursor: no Python frame a row


def iter_lines(
    conn: sqlite3.Connection,
    columns: Sequence[Column],
    where: str = "",
    params: Sequence[object] = (),
    order: str = "",
) -> Iterator[tuple[str, dict[str, Any]]]:
    """`iter_rows` as (run id, the record line the row holds): an axis the row lacks reads
    as its default, a latency as an object of its statistics."""
    for run_id, *values in iter_rows(conn, columns, where, params, order):
        yield str(run_id), line_of(str(run_id), columns, values)


def _records(conn: sqlite3.Connection, run_id: str) -> list[Record]:
    lines = iter_lines(conn, COLUMNS, "WHERE run_id = ?", (run_id,), "ORDER BY cell")
    return [record_of(line) for _, line in lines]


_RUN_COLUMNS = "run_id, started, manifest, run_dir"


def _load(conn: sqlite3.Connection, rows: list[tuple[str, str, str, str]]) -> list[HistoryRun]:
    runs = []
    for run_id, started, manifest, run_dir in rows:
        try:
            records = _records(conn, run_id)
            loaded = Manifest.from_dict(json.loads(manifest))
        except ValueError as exc:  # SchemaError, Malformed, BadValue, JSONDecodeError
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
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE comparability_key IN (?, ?) AND started < ? AND run_id != ? ORDER BY started DESC, run_id DESC LIMIT ?",
            (
                *comparable_keys(manifest),
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
            "SELECT COUNT(*) FROM runs WHERE comparability_key NOT IN (?, ?)",
            comparable_keys(manifest),
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


@dataclass(frozen=True)
class Pruned:
    """What `prune` dropped, and the file's size after it."""

    runs: tuple[str, ...]
    reason: str
    megabytes: float


def to_drop(
    runs: Sequence[tuple[str, str, int]], *, keep_days: int, max_bytes: int, total_bytes: int
) -> tuple[list[str], str]:
    """Which runs (run id, started, records) to drop, oldest first, and why: those started
    more than `keep_days` before the newest, then the oldest until the records left take
    at most `max_bytes` (each record its share of `total_bytes`). Pure: the nightly's
    budget, tested with hand-made states."""
    if not runs:
        return [], ""
    ordered = sorted(runs, key=lambda r: (r[1], r[0]))
    newest = datetime.fromisoformat(ordered[-1][1])
    cut = (newest - timedelta(days=keep_days)).isoformat()
    dropped = [r for r in ordered if r[1] < cut]
    why = f"started before {cut[:10]} ({keep_days} days before the newest)" if dropped else ""
    rows = sum(r[2] for r in ordered) or 1
    left = [r for r in ordered if r not in dropped]
    over: list[tuple[str, str, int]] = []
    while left[:-1] and sum(r[2] for r in left) * total_bytes / rows > max_bytes:
        over.append(left.pop(0))
    if over:
        why = (
            why + "; " if why else ""
        ) + f"the oldest, to keep the history under {max_bytes / 2**20:.3g} MiB"
    return [r[0] for r in dropped + over], why


def prune(db_path: Path, *, keep_days: int, max_mb: float) -> Pruned:
    """Drop what `to_drop` says, then VACUUM: the file shrinks to what is left."""
    with _connect(db_path, create=False) as conn:
        runs = conn.execute(
            "SELECT r.run_id, r.started, COUNT(c.run_id) FROM runs r "
            "LEFT JOIN records c ON c.run_id = r.run_id GROUP BY r.run_id"
        ).fetchall()
        total = db_path.stat().st_size
        try:
            datetime.fromisoformat(min((r[1] for r in runs), default="2000-01-01"))
        except ValueError as exc:
            raise HistoryError(f"{db_path}: a run's start is not a date: {exc}") from None
        drop, why = to_drop(
            runs, keep_days=keep_days, max_bytes=int(max_mb * 2**20), total_bytes=total
        )
        for run_id in drop:
            conn.execute("DELETE FROM records WHERE run_id = ?", (run_id,))
            conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
    if drop:
        with closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
            conn.execute("VACUUM")
    return Pruned(tuple(drop), why, db_path.stat().st_size / 2**20)


def dump(db_path: Path) -> list[tuple[object, ...]]:
    """Every row of every table in a stable order: equal dumps mean equal content."""
    with _connect(db_path, create=False) as conn:
        rows: list[tuple[object, ...]] = []
        for table in ("meta", "runs", "records"):
            order = "1, 2" if table == "records" else "1"
            rows.extend(
                (table, *row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")
            )
        return rows
