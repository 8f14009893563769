"""Run-to-run spread of ORT p50 on the vision suite over RUNS runs: the coefficient of
variation per cell (median and worst), so the compare thresholds can be set from it."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from benchmarks.conftest import Figures, harness
from harness import store

RUNS = int(os.environ.get("HARNESS_NOISE_RUNS", "5"))


def test_noise_vision(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def runs() -> list[Path]:
        dirs = [tmp_path / f"run{i}" for i in range(RUNS)]
        for d in dirs:
            harness("run", "--suite", "vision", "--out", str(d), "--no-report")
        return dirs

    dirs = benchmark.pedantic(runs, rounds=1, iterations=1)
    p50s: dict[tuple, list[float]] = {}
    for d in dirs:
        for r in store.read_records(d):
            if r.ort_latency_ms is not None and r.status in ("ok", "xpass"):
                p50s.setdefault(r.cell.key, []).append(r.ort_latency_ms.p50)
    cvs = {k: statistics.stdev(v) / statistics.mean(v) for k, v in p50s.items() if len(v) == RUNS}
    worst_key = max(cvs, key=lambda k: cvs[k])
    median_cv = statistics.median(cvs.values())
    benchmark.extra_info.update(
        median_cv=median_cv, worst_cv=cvs[worst_key], cells=len(cvs), runs=RUNS
    )
    figures.add(
        f"Noise (vision, ORT p50 over {RUNS} runs)",
        [
            f"coefficient of variation per cell: median {median_cv:.3%}, worst {cvs[worst_key]:.3%} "
            f"({' '.join(map(str, worst_key))}), over {len(cvs)} cells",
        ],
    )
    assert cvs
