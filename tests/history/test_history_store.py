"""The history's summary columns (harness.history.summary) and its database file: what a
record keeps there, a database of today's harness and one cut off mid-write, an axis the
database predates, a run directory that is gone or corrupt (no torch)."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.history import db as history
from harness.history.summary import (
    BY_NAME,
    CELL_COLUMNS,
    COLUMNS,
    line_of,
    record_of,
    row_of_record,
    summarized,
)
from harness.store.axes import AXES, BATCH
from harness.store.records import Dtype, OrtOpt
from harness.store.runs import read_run
from tests.fixtures_compare import manifest, record, write_run

SCHEMA_2 = Path(__file__).parent / "fixtures" / "history-schema2.sqlite"
ROOT = Path(__file__).resolve().parents[2]


def test_columns_follow_the_record_line_and_latency_declarations():
    kinds = {c.name: c.kind for c in COLUMNS}
    cell = [c.name for c in COLUMNS[:CELL_COLUMNS]]
    assert cell == ["model", "exporter", "family", *(a.key_column for a in AXES)]
    assert "shape" in cell and BY_NAME["shape"].key == "dynamic"  # the axis's own column name
    assert (kinds["opset"], kinds["shape"], kinds["dtype"]) == ("int", "bool", "text")
    assert (kinds["status"], kinds["export_s"], kinds["ort_runtime"]) == ("text", "real", "json")
    assert kinds["ort_latency_ms.p50"] == "real" and kinds["eager_latency_ms.n"] == "int"
    assert "ort_latency_ms.samples" not in kinds and "error_message" not in kinds
    assert (BY_NAME["dtype"].default, BY_NAME["model"].default) == (Dtype.FLOAT32, None)


def test_a_record_keeps_its_figures_and_leaves_its_samples():
    r = record("m", ort=[1.0, 2.0, 3.0, 4.0, 5.0], eager=[2.0, 4.0], export_s=1.5, rss_mb=300.0)
    r = r.with_cell(dtype=Dtype.FLOAT16, ort_opt=OrtOpt.ALL)
    kept = summarized(r)
    assert kept.ort.latency is not None and kept.eager.latency is not None
    assert kept.ort.latency.samples == ()
    # percentiles by linear interpolation: p25 of 1..5 is 2, p75 is 4, p90 is 4.6
    assert (kept.ort.latency.p25, kept.ort.latency.p50, kept.ort.latency.p75) == (2.0, 3.0, 4.0)
    # p90 of 5 samples is not published (harness.stats: 10 at least): kept as null
    assert kept.ort.latency.p90 is None and kept.ort.latency.n == 5
    assert kept.speedup == pytest.approx(3.0 / 3.0)
    assert (kept.export.seconds, kept.export.peak_rss_mb) == (1.5, 300.0)
    assert kept.cell == r.cell and kept.cell.dtype is Dtype.FLOAT16
    assert kept.export.aten_ops is None and kept.numerics.checks is None


def test_a_failure_keeps_its_status_stage_and_signature():
    r = record("m", status="export_failed", stage="translate", error=RuntimeError("bad op 3"))
    kept = summarized(r)
    assert (kept.status, kept.stage, kept.error_type) == (r.status, r.stage, "RuntimeError")
    assert kept.error_signature == r.error_signature and kept.error_message is None


@pytest.mark.parametrize(
    ("column", "value", "kind"),
    [
        ("ort_latency_ms.p50", "'fast'", "real"),
        ("ort_latency_ms.p50", "9e999", "real"),  # SQLite's infinity
        ("shape", "2", "bool"),
        ("opset", "18.5", "int"),
        ("artifacts", "'{not json'", "json"),
        ("status", "X'00'", "text"),
    ],
)
def test_a_bad_value_names_its_run_cell_and_column(tmp_path: Path, column, value, kind):
    db = tmp_path / "h.sqlite"
    history.add_runs(db, _nights(tmp_path, 1))
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE records SET \"{column}\" = {value} WHERE model = 'a'")
    with pytest.raises(
        history.HistoryError, match=f"column '{column}' holds .*, not a {kind}"
    ) as raised:
        history.load_runs(db)
    assert "run 'n0', cell 'a--dynamo--op18--cpu--static--base'" in str(raised.value)


def test_a_line_without_an_axis_reads_as_its_default():
    row = row_of_record(record("m", ort=[1.0]))
    line = line_of("r", COLUMNS, row)
    kept = record_of({k: v for k, v in line.items() if k not in ("dtype", "ort_opt", "patch")})
    assert (kept.dtype, kept.ort_opt, kept.patch) == (Dtype.FLOAT32, OrtOpt.DEFAULT, "none")


def test_an_ingested_line_is_checked_but_its_samples_are_not_kept(tmp_path: Path):
    run_dir = write_run(tmp_path / "r", manifest("r"), [record("a", ort=[1.0, 2.0, 3.0])])
    line = json.loads((run_dir / "records.jsonl").read_text())
    (run_dir / "records.jsonl").write_text(json.dumps({**line, "status": "fine"}) + "\n")
    with pytest.raises(history.RunDirError, match=r"records.jsonl:1: .*status"):
        history.add_runs(tmp_path / "h.sqlite", [run_dir])


def _nights(tmp_path: Path, n: int) -> list[Path]:
    return [
        write_run(
            tmp_path / f"n{i}",
            manifest(f"n{i}", f"2025-01-0{i + 1}T00:00:00+00:00"),
            [record("a", run_id=f"n{i}", ort=[1.0 + i, 2.0 + i, 3.0 + i]), record("b")],
        )
        for i in range(n)
    ]


def test_a_database_of_todays_harness_migrates_in_place(tmp_path: Path):
    """tests/history/fixtures/history-schema2.sqlite was written by the harness before schema 3
    (three nights of the tiny zoo, each record whole with 20 latency samples)."""
    db = tmp_path / "h.sqlite"
    shutil.copyfile(SCHEMA_2, db)
    with sqlite3.connect(db) as conn:
        old = {
            (run, cell): json.loads(text)
            for run, cell, text in conn.execute("SELECT run_id, cell, record FROM records")
        }
    runs = history.load_runs(db)
    assert [len(r.records) for r in runs] == [6, 6, 6]
    for run in runs:
        for r in run.records:
            whole = old[(run.run_id, r.cell.cell_id)]
            assert (r.status.value, r.error_signature) == (
                whole["status"],
                whole["error_signature"],
            )
            latency = whole["ort_latency_ms"]
            assert (r.ort.latency.p50 if r.ort.latency else None) == (latency and latency["p50"])
    assert sum(r.status.value == "ok" for run in runs for r in run.records) == 11
    # written before the batch axis existed: its cells read at the axis's default
    assert {r.cell[BATCH] for run in runs for r in run.records} == {BATCH.default}
    assert history.dump(db)[0] == ("meta", "schema", "3")
    assert db.stat().st_size < SCHEMA_2.stat().st_size / 2


def _killed(script: str, *args: str) -> None:
    """Run `script` in a child that SIGKILLs itself where the script says `die()`."""
    prelude = "import os, signal\ndef die():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + script, *args], cwd=ROOT, capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


def test_an_ingestion_cut_off_mid_write_leaves_the_history_as_it_was(tmp_path: Path):
    nights = _nights(tmp_path, 3)
    db = tmp_path / "h.sqlite"
    history.add_runs(db, nights[:2])
    before = history.dump(db)
    _killed(
        "import sys\nfrom pathlib import Path\nfrom harness.history import db as history\n"
        "run = history.read_run(Path(sys.argv[2]))\n"
        "with history._connect(Path(sys.argv[1]), create=True) as conn:\n"
        "    history._insert(conn, run, Path(sys.argv[2]))\n"
        "    die()\n",
        str(db),
        str(nights[2]),
    )
    assert Path(f"{db}-journal").is_file()  # the hot journal SQLite rolls back
    assert history.dump(db) == before
    assert [r.run_id for r in history.load_runs(db)] == ["n0", "n1"]


def test_a_migration_cut_off_mid_write_runs_again(tmp_path: Path):
    db = tmp_path / "h.sqlite"
    shutil.copyfile(SCHEMA_2, db)
    _killed(
        "import sys\nfrom pathlib import Path\nfrom harness.history import db as history\nfrom harness.history import schema as history_schema\n"
        "convert = history_schema._converted\n"
        "def converted(rows):\n    out = convert(rows)\n    die()\n"
        "history_schema._converted = converted\n"
        "history.load_runs(Path(sys.argv[1]))\n",
        str(db),
    )
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT value FROM meta").fetchone() == ("2",)
    assert [len(r.records) for r in history.load_runs(db)] == [6, 6, 6]


def test_a_column_the_database_predates_reads_as_its_default_and_is_added(tmp_path: Path):
    db = tmp_path / "h.sqlite"
    history.add_runs(db, _nights(tmp_path, 1))
    with sqlite3.connect(db) as conn:
        conn.execute('ALTER TABLE records DROP COLUMN "ort_opt"')  # as before the axis existed
        lines = [line for _, line in history.iter_lines(conn, COLUMNS)]  # selected as NULL
    assert [line["ort_opt"] for line in lines] == [OrtOpt.DEFAULT, OrtOpt.DEFAULT]
    (run,) = history.load_runs(db)  # opened for writing: the column is added
    assert {r.ort_opt for r in run.records} == {OrtOpt.DEFAULT}
    with sqlite3.connect(db) as conn:
        assert "ort_opt" in {row[1] for row in conn.execute("PRAGMA table_info(records)")}


def test_a_newer_schema_and_a_truncated_file_are_one_line(tmp_path: Path):
    db = tmp_path / "h.sqlite"
    history.add_runs(db, _nights(tmp_path, 1))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value = '9'")
    with pytest.raises(history.HistoryError, match="has schema 9; this harness reads 3"):
        history.load_runs(db)
    db.write_bytes(SCHEMA_2.read_bytes()[:3000])
    with pytest.raises(history.HistoryError, match="not a readable history database"):
        history.load_runs(db)


def test_the_latest_run_is_read_whole_from_its_directory_or_says_why_not(tmp_path: Path):
    nights = _nights(tmp_path, 2)
    db = tmp_path / "h.sqlite"
    history.add_runs(db, nights)
    latest = history.load_runs(db)[-1]
    full, why = latest.in_full()
    assert why is None and full.by_cell() == read_run(nights[1]).by_cell()
    (nights[1] / "records.jsonl").write_text('{"schema": 6, "run_id": "n1"}\n')
    summary, why = latest.in_full()
    assert summary.records == tuple(latest.records)
    assert why is not None and "records.jsonl:1" in why and "summary is compared" in why
    shutil.rmtree(nights[1])
    _, why = latest.in_full()
    assert why is not None and "is not a run directory" in why


def test_compare_history_says_in_one_line_when_the_latest_samples_are_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    nights = _nights(tmp_path, 3)
    db = str(tmp_path / "h.sqlite")
    assert main(["history", "--db", db, "add", *map(str, nights[:2])]) == 0
    shutil.rmtree(nights[1])
    assert main(["compare", "--history", "--db", db, str(nights[2])]) in (0, 1)
    err = capsys.readouterr().err
    assert "note: run n1:" in err and "is not a run directory" in err
    assert "Traceback" not in err


def _runs(days: int) -> list[tuple[str, str, int]]:
    return [(f"r{d:02d}", f"2026-08-{d + 1:02d}T03:00:00+00:00", 100) for d in range(days)]


def test_prune_drops_runs_older_than_the_window_then_the_oldest_over_the_budget():
    drop, why = history.to_drop(_runs(10), keep_days=7, max_bytes=10**9, total_bytes=10**6)
    assert drop == ["r00", "r01"] and "before 2026-08-03" in why  # the newest is 08-10
    # 10 runs of 100 records in a 1 000 000-byte file: 1 000 bytes a record, 100 000 a run
    drop, why = history.to_drop(_runs(10), keep_days=365, max_bytes=450_000, total_bytes=10**6)
    assert drop == ["r00", "r01", "r02", "r03", "r04", "r05"] and "under 0.429 MiB" in why
    drop, _ = history.to_drop(_runs(3), keep_days=365, max_bytes=1, total_bytes=10**6)
    assert drop == ["r00", "r01"]  # the newest run is always kept
    assert history.to_drop([], keep_days=1, max_bytes=1, total_bytes=0) == ([], "")


def test_history_prune_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    db = tmp_path / "h.sqlite"
    history.add_runs(db, _nights(tmp_path, 3))
    assert main(["history", "--db", str(db), "prune", "--keep-days", "1"]) == 0
    assert "dropped 1 runs (started before 2025-01-02" in capsys.readouterr().out
    assert [r.run_id for r in history.load_runs(db)] == ["n1", "n2"]
    assert main(["history", "--db", str(db), "prune", "--keep-days", "0"]) == 2
    assert "--keep-days: takes a whole number of days" in capsys.readouterr().err
