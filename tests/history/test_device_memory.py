"""A CUDA cell's export peak on the device as the nightly tracks it: kept by the history,
judged by `harness compare` (one run and `--history`) and charted on the site's model page,
beside the host's peak, each over the model's weights.

No GPU exists here: the records are what a CUDA cell writes (`export_peak_cuda_mb` from
`torch.cuda.max_memory_allocated`, harness.cell.timing.PeakCuda), made by hand as run
directories; everything that reads them is the real code."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from harness.compare import Options, compare_history, compare_runs
from harness.history import db as history
from harness.publish import pages
from harness.publish.model import build_site_model
from harness.publish.read import load_nights
from harness.store.records import Record
from harness.store.runs import read_run
from tests.conftest import run_cli
from tests.fixtures_compare import manifest, one, record, run, write_run

WEIGHTS_MB = 2000.0


def _cuda(peak_cuda_mb: float, model: str = "big") -> Record:
    found = record(model, export_s=30.0, rss_mb=150.0)
    cell = found.cell.replace(device="cuda")
    export = replace(found.export, peak_cuda_mb=peak_cuda_mb, weights_mb=WEIGHTS_MB)
    return found.with_changes(cell=cell, export=export)


def _night(tmp_path: Path, i: int, device_peak: float) -> Path:
    steady = 1000.0 * (1 + 0.01 * math.sin(i))  # 1% night-to-night noise
    records = [_cuda(device_peak), _cuda(steady, "small"), record("cpu", export_s=2.0, rss_mb=90)]
    started = f"2025-02-{i + 1:02d}T00:00:00+00:00"
    return write_run(tmp_path / f"n{i}", manifest(f"n{i}", started), records)


@pytest.fixture
def nights(tmp_path: Path) -> list[Path]:
    return [_night(tmp_path, i, 3000.0 * (1 + 0.01 * math.cos(i))) for i in range(8)]


def test_a_grown_device_peak_is_a_finding_against_one_run_and_a_cpu_cell_has_none() -> None:
    base = run("A", [_cuda(3000.0), record("cpu", rss_mb=90)])
    grown = compare_runs(base, run("B", [_cuda(4500.0), record("cpu", rss_mb=90)]))
    found = one(grown, "metric_regressed")
    assert (found.metric, found.cell.model) == ("export_cuda_memory", "big")
    assert found.ratio == pytest.approx(1.5)
    # the CPU cell has no device peak on either side: nothing to compare, nothing counted
    assert not any("export_cuda_memory" in k for k in grown.not_compared)
    same = compare_runs(base, run("C", [_cuda(3100.0), record("cpu", rss_mb=90)]))
    assert same.findings == ()


def test_the_history_keeps_the_device_peak_and_compare_history_blocks_on_its_growth(
    tmp_path: Path, nights: list[Path]
) -> None:
    db = tmp_path / "h.sqlite"
    history.add_runs(db, nights)
    kept = {r.model: r for r in history.load_runs(db)[-1].records}
    assert kept["big"].export.peak_cuda_mb == pytest.approx(3000.0 * (1 + 0.01 * math.cos(7)))
    assert kept["cpu"].export.peak_cuda_mb is None

    grown = _night(tmp_path, 8, 4500.0)
    c = compare_history([read_run(p) for p in nights], read_run(grown), Options())
    (f,) = [f for f in c.findings if f.metric == "export_cuda_memory"]
    assert (f.cell.model, f.severity) == ("big", "blocking")
    assert f.ratio == pytest.approx(1.5, rel=0.02)

    done = run_cli("compare", "--history", "--db", str(db), str(grown))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "export peak CUDA memory" in done.stdout and "big dynamo@18 cuda" in done.stdout
    steady = run_cli("compare", "--history", "--db", str(db), str(_night(tmp_path, 9, 3010.0)))
    assert steady.returncode == 0, steady.stdout + steady.stderr


def test_the_site_charts_the_device_peak_and_its_ratio_to_the_weights_for_cuda_cells_only(
    tmp_path: Path, nights: list[Path]
) -> None:
    db = tmp_path / "h.sqlite"
    history.add_runs(db, nights)
    newest = {r.cell.model: r for r in load_nights(db)[-1].results}
    peak = 3000.0 * (1 + 0.01 * math.cos(7))
    assert newest["big"].export_peak_cuda_mb == pytest.approx(peak)
    assert newest["big"].cuda_over_weights == pytest.approx(peak / WEIGHTS_MB)
    assert newest["big"].memory_over_weights == pytest.approx(150.0 / WEIGHTS_MB)
    assert (newest["cpu"].export_peak_cuda_mb, newest["cpu"].cuda_over_weights) == (None, None)

    site = build_site_model({"stable": load_nights(db)})
    big = pages.model_page(site, "big", {})
    assert "<th>export peak CUDA MB</th>" in big and f"newest {peak:.3g}" in big
    assert "<th>export peak CUDA / weights</th>" in big and f"newest {peak / WEIGHTS_MB:.3g}" in big
    cpu = pages.model_page(site, "cpu", {})
    assert "CUDA" not in cpu and "<th>export peak RSS MB</th>" in cpu


def test_a_history_from_before_the_column_reads_and_takes_a_cuda_night(
    tmp_path: Path, nights: list[Path]
) -> None:
    """A database written before `export_peak_cuda_mb` was kept (the column dropped again, as
    yesterday's harness wrote it): its rows read as no device peak, and the next night's
    CUDA cells add the column and their peaks without a rebuild."""
    db = tmp_path / "h.sqlite"
    history.add_runs(db, nights[:3])
    with sqlite3.connect(db) as conn:
        conn.execute('ALTER TABLE records DROP COLUMN "export_peak_cuda_mb"')
    history.add_runs(db, nights[3:5])
    found = {r.run_id: {x.cell.model: x for x in r.results} for r in load_nights(db)}
    assert [found[f"n{i}"]["big"].export_peak_cuda_mb is None for i in range(5)] == [
        True, True, True, False, False,
    ]  # fmt: skip
    assert found["n4"]["big"].cuda_over_weights == pytest.approx(
        3000.0 * (1 + 0.01 * math.cos(4)) / WEIGHTS_MB
    )
