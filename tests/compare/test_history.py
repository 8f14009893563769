"""The history database and `harness compare --history`: noise-scaled thresholds, night shift."""

from __future__ import annotations

import math
import random
import sqlite3
from pathlib import Path

import pytest

from harness.cli import main
from harness.compare import BLOCKING, INFO, WARNING, Options, Thresholds, compare_history
from harness.compare.against_history import Series, night_shift
from harness.history import db as history
from harness.history.summary import summarized
from harness.store.records import Dtype, OrtOpt
from harness.store.runs import read_run
from tests.fixtures_compare import (
    HARDWARE,
    manifest,
    record,
    samples,
    typed_manifest,
    write_run,
)

# Run-to-run factors of the noisy series: it jumps 10-30% from night to night.
NOISY = [1.0, 1.18, 0.87, 1.12, 0.9, 1.15, 0.85, 1.1]


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def night(
    tmp_path: Path, i: int, factors: dict[str, float], *, hardware=None, export: float = 1.0
) -> Path:
    """Run `i`: five quiet cells q0..q4 and a noisy one, latency scaled by `factors`; q4 also
    has an export time (scaled by `export`)."""
    rng = random.Random(i)
    quiet = {f"q{k}": 2.0 * (1 + 0.01 * math.sin(i + k)) for k in range(5)}
    medians = {**quiet, "noisy": 2.0 * NOISY[i % len(NOISY)]}
    export_s = 3.0 * (1 + 0.02 * math.cos(i)) * export
    records = [
        record(
            name,
            ort=samples(rng, m * factors.get(name, 1.0), 0.02, n=40),
            export_s=export_s if name == "q4" else None,
        )
        for name, m in medians.items()
    ]
    man = manifest(f"night{i:02d}", f"2025-01-{i + 1:02d}T00:00:00+00:00", hardware=hardware)
    return write_run(tmp_path / f"night{i:02d}", man, records)


@pytest.fixture
def nights(tmp_path: Path) -> list[Path]:
    return [night(tmp_path, i, {}) for i in range(8)]


def test_add_list_and_load_runs(tmp_path: Path, nights):
    db = tmp_path / "h.sqlite"
    history.add_runs(db, nights[:2])
    history.add_runs(db, nights[1:3])  # re-adding replaces
    runs = history.load_runs(db)
    assert [r.run_id for r in runs] == ["night00", "night01", "night02"]
    first = runs[0]
    assert isinstance(first, history.HistoryRun) and first.started == "2025-01-01T00:00:00+00:00"
    assert first.manifest.suite == "synthetic" and len(first.records) == 6
    whole = read_run(nights[0]).by_cell()
    assert {r.cell.key: r for r in first.records} == {k: summarized(r) for k, r in whole.items()}
    q0 = next(r for r in first.records if r.model == "q0")
    assert q0.ort.latency is not None and whole[q0.cell.key].ort.latency is not None
    assert q0.ort.latency.samples == () and len(whole[q0.cell.key].ort.latency.samples) == 40
    assert q0.ort.latency.p50 == whole[q0.cell.key].ort.latency.p50
    assert [r.run_id for r in history.load_runs(db, limit=2)] == ["night01", "night02"]
    assert [(s.run_id, s.cells, s.ok) for s in history.list_runs(db)] == [
        (f"night0{i}", 6, 6) for i in range(3)
    ]


def test_cells_that_differ_only_in_patch_dtype_or_ort_optimisation_are_each_kept(
    tmp_path: Path,
):
    plain = record("m", ort=[1.0, 1.1, 1.2])
    others = [
        plain.with_cell(patch="p"),
        plain.with_cell(dtype=Dtype.FLOAT16),
        plain.with_cell(ort_opt=OrtOpt.FUSIONS),
    ]
    run_dir = write_run(tmp_path / "r", manifest("r"), [plain, *others])
    db = tmp_path / "h.sqlite"
    history.add_runs(db, [run_dir])
    (loaded,) = history.load_runs(db)
    assert sorted(r.cell.cell_id for r in loaded.records) == sorted(
        r.cell.cell_id for r in [plain, *others]
    )


def test_a_schema_1_database_is_migrated_with_its_records(tmp_path: Path, nights):
    """Schema 1 kept each record whole, keyed without the cell's id; its rows become
    summaries under the new key."""
    db = tmp_path / "h.sqlite"
    run = read_run(nights[0])
    with sqlite3.connect(db) as conn:
        conn.executescript(SCHEMA_1)
        conn.executemany(
            "INSERT INTO records VALUES (?,?,?,?,?,?,?,?,?)",
            [(run.run_id, *r.cell.key[:6], r.status.value, r.to_json()) for r in run.records],
        )
        conn.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            history._run_row(run, nights[0]),
        )
    (loaded,) = history.load_runs(db)
    assert {r.cell.key: r for r in loaded.records} == {
        k: summarized(r) for k, r in run.by_cell().items()
    }
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone() == ("3",)
        cells = {c for (c,) in conn.execute("SELECT cell FROM records")}
    assert cells == {r.cell.cell_id for r in loaded.records}


SCHEMA_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
INSERT INTO meta VALUES ('schema', '1');
CREATE TABLE runs (run_id TEXT PRIMARY KEY, started TEXT NOT NULL, finished TEXT, suite TEXT,
    run_dir TEXT NOT NULL, comparability_key TEXT NOT NULL, comparability TEXT NOT NULL,
    torch TEXT, onnx TEXT, onnxscript TEXT, onnxruntime TEXT, versions TEXT NOT NULL,
    manifest TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE records (run_id TEXT NOT NULL, model TEXT NOT NULL, exporter TEXT NOT NULL,
    opset INTEGER NOT NULL, device TEXT NOT NULL, dynamic INTEGER NOT NULL,
    variant TEXT NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL,
    PRIMARY KEY (run_id, model, exporter, opset, device, dynamic, variant)) WITHOUT ROWID;
"""


def test_missing_database_is_a_clear_error(tmp_path: Path):
    with pytest.raises(history.HistoryError, match="no history database"):
        history.load_runs(tmp_path / "none.sqlite")


def test_comparability_key_ignores_versions_not_hardware():
    base = typed_manifest("a")
    assert history.comparability_key(base) == history.comparability_key(
        typed_manifest("b", torch="2.10.0")
    )
    assert history.comparability_key(base) != history.comparability_key(
        typed_manifest("c", threads=4)
    )
    assert history.comparability_key(base) != history.comparability_key(
        typed_manifest("d", hardware={**HARDWARE, "cores": 16})
    )


def test_rebuild_from_run_dirs_gives_the_same_content(tmp_path: Path, nights):
    db = tmp_path / "h.sqlite"
    for path in nights[:4]:
        history.add_runs(db, [path])
    before = history.dump(db)
    history.rebuild(db, nights[:4][::-1])
    assert history.dump(db) == before


def test_night_shift_is_the_median_log_ratio():
    def series(x: float) -> Series:
        return Series(record(), medians=(1.0, 1.0), latest_samples=(1.0,), candidate=(x,))

    ratios = [1.1, 1.2, 1.3, 0.9, 1.25]
    assert night_shift([series(x) for x in ratios], Thresholds()) == pytest.approx(math.log(1.2))
    assert night_shift([series(x) for x in ratios[:4]], Thresholds()) == 0  # too few series to tell


def compare_candidate(tmp_path: Path, nights, factors: dict[str, float]):
    candidate = read_run(night(tmp_path, 8, factors))
    return compare_history([read_run(p) for p in nights], candidate, Options())


def test_threshold_scales_with_each_series_noise(tmp_path: Path, nights):
    c = compare_candidate(tmp_path, nights, {"q0": 1.25, "noisy": 1.25})
    (f,) = [f for f in c.findings if f.kind == "metric_regressed"]
    assert f.cell.model == "q0" and f.severity == BLOCKING
    assert f.threshold == pytest.approx(1.1) and f.ratio == pytest.approx(1.25, rel=0.04)
    assert "noise" in f.evidence and "night-wide shift" in f.evidence


def test_night_wide_shift_is_divided_out(tmp_path: Path, nights):
    everything = {name: 1.2 for name in ("q0", "q1", "q2", "q3", "q4", "noisy")}
    c = compare_candidate(tmp_path, nights, {**everything, "q1": 1.2 * 1.4})
    regressed = [f for f in c.findings if f.kind == "metric_regressed"]
    assert [f.cell.model for f in regressed] == ["q1"]
    assert regressed[0].ratio == pytest.approx(1.4, rel=0.04)
    (shift,) = [f for f in c.findings if f.kind == "night_shift"]
    assert shift.severity == WARNING and shift.ratio == pytest.approx(1.2, rel=0.03)


def test_export_time_blocks_against_a_long_enough_history(tmp_path: Path, nights):
    candidate = read_run(night(tmp_path, 8, {}, export=1.3))
    c = compare_history([read_run(p) for p in nights], candidate, Options())
    (f,) = c.findings
    assert (f.metric, f.severity, f.cell.model) == ("export_time", BLOCKING, "q4")
    short = compare_history([read_run(p) for p in nights[:3]], candidate, Options())
    assert [(f.metric, f.severity) for f in short.findings] == [("export_time", INFO)]


def test_short_history_uses_the_floor_and_the_rank_test(tmp_path: Path, nights):
    c = compare_candidate(tmp_path, nights[:2], {"q0": 1.3, "q1": 1.05})
    (f,) = [f for f in c.findings if f.kind == "metric_regressed"]
    assert f.cell.model == "q0" and "too short" in f.evidence and "Mann-Whitney" in f.evidence


def test_history_cli(tmp_path: Path, nights, capsys):
    db = str(tmp_path / "h.sqlite")
    assert main(["history", "--db", db, "add", *map(str, nights)]) == 0
    assert main(["history", "list", "--db", db]) == 0
    assert "8 runs in" in capsys.readouterr().out
    slow = night(tmp_path, 8, {"q2": 1.3})
    assert main(["compare", "--history", "--db", db, "--last", "8", str(slow)]) == 1
    assert "q2 dynamo@18 cpu" in capsys.readouterr().out
    assert main(["compare", "--history", "--db", db, str(night(tmp_path, 9, {}))]) == 0
    assert main(["history", "--db", db, "rebuild", *map(str, nights)]) == 0


def test_history_cli_errors(tmp_path: Path, nights, capsys):
    db = str(tmp_path / "h.sqlite")
    assert main(["compare", "--history", "--db", db, str(nights[0])]) == 2
    assert "no history database" in capsys.readouterr().err
    main(["history", "--db", db, "add", *map(str, nights)])
    elsewhere = night(tmp_path, 8, {}, hardware={**HARDWARE, "cpu": "Other"})
    assert main(["compare", "--history", "--db", db, str(elsewhere)]) == 2
    assert "no comparable run" in capsys.readouterr().err
    assert main(["history", "--db", db, "add", str(tmp_path / "missing")]) == 2


def test_history_compares_a_run_with_runs_of_its_host_and_older_runs_not_another_hosts(
    tmp_path: Path, nights
) -> None:
    db = tmp_path / "h.sqlite"
    zen4 = {**HARDWARE, "cpu_id": "family 25 model 17 stepping 1 avx512f"}
    zen5 = {**HARDWARE, "cpu_id": "family 26 model 2 stepping 0 avx512f avx_vnni"}
    on_zen5 = [night(tmp_path, i, {}, hardware=zen5) for i in (8, 9)]
    history.add_runs(db, [*nights[:4], *on_zen5])
    candidate = read_run(night(tmp_path, 10, {}, hardware=zen4)).manifest
    found = [r.run_id for r in history.load_comparable(db, candidate, last=10)]
    assert found == ["night00", "night01", "night02", "night03"]
    assert history.count_other_keys(db, candidate) == 2
    later = read_run(night(tmp_path, 11, {}, hardware=zen5)).manifest
    found = [r.run_id for r in history.load_comparable(db, later, last=3)]
    assert found == ["night03", "night08", "night09"]
