"""Run-to-run spread of ORT p50 on the vision suite over RUNS runs (the coefficient of
variation per cell, median and worst, so the compare thresholds can be set from it), and
the comparison calibrated on the same runs (calibrate.py): the A/A false-alarm rate of
consecutive pairs and the smallest single-model latency slowdown the defaults catch."""

from __future__ import annotations

import json
import os
from pathlib import Path

from benchmarks.calibrate import calibration_lines, detection, false_alarms, noise, noise_lines
from benchmarks.conftest import RESULTS, Figures, harness
from harness.store.runs import read_run

RUNS = int(os.environ.get("HARNESS_NOISE_RUNS", "5"))


def test_noise_and_alert_calibration_vision(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    def runs() -> list[Path]:
        dirs = [tmp_path / f"run{i}" for i in range(RUNS)]
        for d in dirs:
            harness("run", "--suite", "vision", "--out", str(d), "--no-report")
        return dirs

    dirs = benchmark.pedantic(runs, rounds=1, iterations=1)
    loaded = [read_run(d) for d in dirs]
    spread, aa, caught = noise(loaded), false_alarms(loaded), detection(loaded)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "calibration.json").write_text(
        json.dumps({"noise": spread, "aa": aa, "detection": caught}, indent=2)
    )
    benchmark.extra_info.update(noise=spread, aa_rate=aa["rate"], caught=caught["caught_share"])
    figures.add(f"Noise (vision, ORT p50 over {RUNS} runs)", noise_lines(spread, RUNS))
    figures.add("Alert calibration (vision, default thresholds)", calibration_lines(aa, caught))
    assert spread["cells"] > 0 and aa["pairs"] and caught["cases"] > 0
