"""The graph-aware comparison calibrated on the vision suite (calibrate_paired.py): two
runs of one build kept with --keep-graphs (A/A: no alarm may come out), then every kept
cell's graph against a free change of itself (A/A in pairs) and against copies slowed by
+5, +10, +20 and +50% with real extra work, timed together as `harness compare` does.

    HARNESS_CALIBRATE_CELLS=N (default: every ok cell) samples cells for a shorter run."""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks.calibrate_paired import aa_runs, calibrate, table
from benchmarks.conftest import RESULTS, Figures, harness
from harness.store.runs import read_run

CELLS = (
    int(os.environ["HARNESS_CALIBRATE_CELLS"]) if "HARNESS_CALIBRATE_CELLS" in os.environ else None
)
SUITE = os.environ.get("HARNESS_CALIBRATE_SUITE", "vision")


def test_paired_calibration_vision(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = tmp_path / "graphs"

    def runs() -> list[Path]:
        dirs = [tmp_path / "a", tmp_path / "a2"]
        for d in dirs:
            harness(
                "run", "--suite", SUITE, "--keep-graphs", str(store), "--out", str(d), "--no-report"
            )
        return dirs

    dirs = benchmark.pedantic(runs, rounds=1, iterations=1)
    a, a2 = read_run(dirs[0]), read_run(dirs[1])
    summary = calibrate(a, cells=CELLS, levels=(0.05, 0.10, 0.20, 0.50), threads=1)
    summary["aa_runs"] = aa_runs(a, a2)
    size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    summary["store_mib"] = size / 2**20
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "calibration_paired.json").write_text(json.dumps(summary, indent=2))
    levels = summary["levels"]
    figures.add(
        f"Alert calibration, graph-aware ({SUITE}, paired re-measurement)",
        [
            *table(summary),
            "",
            f"A/A runs: {summary['aa_runs']['blocking']} blocking,"
            f" {summary['aa_runs']['ort_latency_findings']} ORT-latency findings in"
            f" {summary['aa_runs']['cells']} cells; graph store {summary['store_mib']:.0f} MiB;"
            f" re-measurement {levels['0.1']['seconds_per_cell']} s per changed cell (median)",
        ],
    )
    assert summary["aa_runs"]["blocking"] == 0
    assert summary["aa_runs"]["ort_latency_findings"] == 0
    assert levels["aa"]["blocking"] == 0
    assert levels["0.1"]["blocking_share"] >= 0.95
    assert levels["0.05"]["reported_share"] >= 0.95
    assert all(levels[k]["shift_reported"] for k in ("0.1", "0.2", "0.5"))
