"""The history database's tables and their migrations, each in one transaction: a migration
cut short (a killed job, a full disk) is rolled back by SQLite at the next open and runs
again, and an older database is brought up to date in place by whoever opens it.

Schema 1 keyed a record by (run, model, exporter, opset, device, shapes, variant); schema 2
by the run and the cell's id; both kept each record whole, its latency samples with it (up to
129 KB a record, 5 GB in 90 nights of the CPU suites). Schema 3 keeps a record's summary
columns (harness.history.summary); its samples stay in its run directory. A column a newer
harness declares (a new axis) is added with ALTER TABLE: no schema bump, and the rows before
it read as the axis's default.
"""

from __future__ import annotations

import json
import sqlite3

from harness.history.summary import COLUMNS, row_of_record, summarize_line

DB_SCHEMA = 3

_RUNS = """
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
"""
_BATCH = 2000  # rows a migration converts at a time (old records are up to 129 KB)


def records_table(name: str = "records") -> str:
    """The records table: the run, the cell's id, and the summary columns."""
    columns = ",\n    ".join(c.sql for c in COLUMNS)
    return (
        f"CREATE TABLE IF NOT EXISTS {name} (\n    run_id TEXT NOT NULL,\n    cell TEXT NOT NULL,"
        f"\n    {columns},\n    PRIMARY KEY (run_id, cell)\n) WITHOUT ROWID"
    )


def version(conn: sqlite3.Connection) -> str | None:
    """The schema the database says it has; None for an empty file."""
    if conn.execute("SELECT name FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
        return None
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    return None if row is None else str(row[0])


def create(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    for statement in (*_RUNS.split(";"), records_table()):
        if statement.strip():
            conn.execute(statement)
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (str(DB_SCHEMA),))
    conn.execute("COMMIT")


def columns_of(conn: sqlite3.Connection, table: str = "records") -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def add_new_columns(conn: sqlite3.Connection) -> None:
    """The columns this harness declares that the database lacks, added (NULL in the rows
    before: their defaults). A read-only database is left as it is: readers select NULL."""
    missing = [c for c in COLUMNS if c.name not in columns_of(conn)]
    try:
        for column in missing:
            conn.execute(f"ALTER TABLE records ADD COLUMN {column.sql}")
    except sqlite3.OperationalError as exc:
        if "readonly" not in str(exc):
            raise


def _converted(rows: list[tuple[str, str]]) -> list[tuple[object, ...]]:
    """Old rows (a run id, a whole record's JSON) as rows of the summary columns."""
    out = []
    for run_id, text in rows:
        record = summarize_line(json.loads(text))
        out.append((run_id, record.cell.cell_id, *row_of_record(record)))
    return out


def to_current(conn: sqlite3.Connection, found: int) -> None:
    """Schema 1 or 2 (each record whole) to 3 (summary columns), in one transaction, then
    VACUUM: the file shrinks to what the summaries take."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("ALTER TABLE records RENAME TO records_whole")
        conn.execute(records_table())
        old = conn.execute("SELECT run_id, record FROM records_whole")
        insert = f"INSERT OR REPLACE INTO records VALUES ({', '.join('?' * (len(COLUMNS) + 2))})"
        while batch := old.fetchmany(_BATCH):
            conn.executemany(insert, _converted(batch))
        conn.execute("DROP TABLE records_whole")
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema'", (str(DB_SCHEMA),))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    conn.execute("VACUUM")
