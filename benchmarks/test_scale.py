"""The driver at scale (issue 3): a 10 000-cell matrix whose cells are cheap (each is
skipped inside the worker, see scale_zoo.py), so what is measured is the driver and Ray:
throughput in cells per minute, the most tasks in flight at once, and the driver's own
peak RSS, against a 1 000-cell matrix. Records are streamed to disk, never all held, so
ten times the cells must not mean ten times the driver's memory."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.conftest import REPO, Figures, harness
from harness.store import rundir as store

ZOO = REPO / "benchmarks" / "scale_zoo.py"
OPSETS = ",".join(str(o) for o in range(7, 21))
SIZES = {"1k": 18, "10k": 179}  # models; 56 cells each


def _run(tmp_path: Path, models: int) -> dict:
    out = tmp_path / f"scale{models}"
    wall = harness(
        "run",
        "--zoo",
        str(ZOO),
        "--exporters",
        "dynamo,torchscript",
        "--opsets",
        OPSETS,
        "--dynamic",
        "--out",
        str(out),
        "--no-report",
        env={"HARNESS_SCALE_MODELS": str(models)},
    )
    dispatch = store.read_manifest(out).to_dict()["dispatch"]
    assert isinstance(dispatch, dict), f"{out} has no dispatch figures: the run did not finish"
    statuses = {r.status for r in store.iter_records(out)}
    lines = sum(1 for _ in store.iter_records(out))
    return {"wall_s": wall, "records": lines, "statuses": sorted(statuses), **dispatch}


def test_driver_scale(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    results = benchmark.pedantic(
        lambda: {k: _run(tmp_path, n) for k, n in SIZES.items()}, rounds=1, iterations=1
    )
    small, big = results["1k"], results["10k"]
    growth = big["driver_peak_rss_mb"] - small["driver_peak_rss_mb"]
    benchmark.extra_info.update(results=json.loads(json.dumps(results)))
    rows = [
        f"| {r['completed']} | {r['records']} | {r['wall_s']:.1f} | {r['cells_per_minute']:.0f} |"
        f" {r['peak_in_flight']} | {r['driver_peak_rss_mb']:.0f} |"
        for r in (small, big)
    ]
    figures.add(
        "Driver at scale (cheap cells, embedded Ray)",
        [
            "| cells | records | wall s | cells/min | most in flight | driver peak RSS MiB |",
            "|---|---|---|---|---|---|",
            *rows,
            "",
            f"driver peak RSS grows {growth:.0f} MiB from {small['completed']} to"
            f" {big['completed']} cells ({growth * 1024 / (big['completed'] - small['completed']):.1f} KiB per cell)",
        ],
    )
    assert big["records"] == big["completed"] == 56 * SIZES["10k"]
    assert big["statuses"] == ["skipped"]
    assert big["peak_in_flight"] <= big["max_in_flight"]
