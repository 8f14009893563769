"""The minimizer's figures over a finished run (docs/guide/repro.md): how many failure
clusters got a repro that reproduces in a fresh process, node counts before and after,
and the minimizer's time per cluster under its bound.

    HARNESS_REPRO_RUN=/work/runs/transformers-sweep python -m pytest benchmarks/test_repro_figures.py

The run is copied first (`harness repro` writes each repro into the records and
artifacts of the run it is given); the copy is HARNESS_REPRO_RUN with `-repro` appended,
kept for reading."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.conftest import Figures, timed_sweep
from harness.repro.figures import figures as repro_figures
from harness.repro.select import clusters
from harness.store import rundir

BOUND_S = "60"  # the default search bound per cluster


def test_repro_figures_of_a_run(benchmark, figures: Figures) -> None:  # type: ignore[no-untyped-def]
    source = os.environ.get("HARNESS_REPRO_RUN")
    if not source:
        pytest.skip("set HARNESS_REPRO_RUN to a finished run directory (a sweep's)")
    copy = Path(source.rstrip("/") + "-repro")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy, symlinks=True)
    wall, load_before, load_after = timed_sweep(
        benchmark, "repro", str(copy), "--bound", BOUND_S, "--no-report", timeout=4 * 3600
    )
    records = rundir.read_records(copy)
    found = repro_figures([r for r in records if r.minimal_repro is not None])
    lines = [
        f"{Path(source).name}: {len(clusters(records))} failure clusters; wall"
        f" {wall / 60:.1f} min; load average before {load_before}, after {load_after}",
        "",
        *found.lines(),
    ]
    benchmark.extra_info.update(json.loads(json.dumps({"lines": lines, "wall_s": wall})))
    figures.add(f"Minimal repros over {Path(source).name}", lines)
    assert found.attempted == len(clusters(records))
