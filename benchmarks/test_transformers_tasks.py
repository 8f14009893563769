"""The `transformers-tasks` suite in full (issue 35): every task head of the installed
registry, both exporters at opset 18, static cells through the real CLI on the embedded Ray
instance, then the heads' dynamic cells. Measured: the static sweep's wall time (target 30
minutes on the 2-core development machine) with the machine's load before and after, and
the figures per task and exporter (benchmarks/tasks_figures.py).

Set HARNESS_SWEEP_OUT=DIR to keep the run directories (DIR/static, DIR/dynamic; e.g. to
refresh model_zoo/transformers/_tasks_expected.csv from DIR/static with `harness zoo
expected`).
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.conftest import Figures, timed_sweep
from benchmarks.tasks_figures import registry_figures, task_table
from harness.report.layout import unique_cells
from harness.store import rundir as store
from model_zoo.transformers._inventory import read_inventory
from model_zoo.transformers._tasks import TASKS_INVENTORY

TARGET_S = 30 * 60.0
CELL_TIMEOUT_S = "300"


def _run(benchmark, out: Path, *flags: str) -> tuple[float, list[float], list[float]]:  # type: ignore[no-untyped-def]
    return timed_sweep(
        benchmark,
        "run", "--suite", "transformers-tasks", "--opsets", "18", "--out", str(out),
        "--timeout", CELL_TIMEOUT_S, "--repro-bound", "0", "--no-report", *flags,
        timeout=4 * TARGET_S,
    )  # fmt: skip


def test_transformers_tasks_sweep(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = Path(os.environ.get("HARNESS_SWEEP_OUT") or tmp_path)
    wall, before, after = _run(benchmark, root / "static")
    records = unique_cells(store.read_records(root / "static"))
    registry = registry_figures(read_inventory(TASKS_INVENTORY))
    assert len(records) == 2 * registry["heads"]
    lines = [
        f"{registry}; {len(records)} cells; wall {wall / 60:.1f} min (target {TARGET_S / 60:.0f});"
        f" load average before {before}, after {after}",
        "",
        task_table(records),
    ]
    figures.add("transformers-tasks suite, static sweep (dynamo + torchscript @18)", lines)
    benchmark.extra_info.update(wall_s=round(wall, 1), cells=len(records), **registry)
    assert registry["pairs_built"] >= 900


def test_transformers_tasks_dynamic(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    root = Path(os.environ.get("HARNESS_SWEEP_OUT") or tmp_path)
    wall, before, after = _run(benchmark, root / "dynamic", "--dynamic-only")
    dynamic = unique_cells(store.read_records(root / "dynamic"))
    static_dir = root / "static"
    static = unique_cells(store.read_records(static_dir)) if static_dir.is_dir() else dynamic
    lines = [
        f"{len(dynamic)} dynamic cells; wall {wall / 60:.1f} min; load before {before}, after {after}",
        "",
        task_table(static, dynamic),
    ]
    figures.add("transformers-tasks suite, dynamic cells verified at a second shape", lines)
    benchmark.extra_info.update(wall_s=round(wall, 1), cells=len(dynamic))
