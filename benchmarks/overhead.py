"""Overhead of a finished run, read off its records: the time from a cell's submission to
its start in a worker, and from its end to the driver having its record (written to disk
right after); what each cell's own process cost (the fork to its first line, its exit,
its private memory) and the zygotes' size. Also the run's throughput.

    python benchmarks/overhead.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.stats import percentile
from harness.store import rundir as store
from harness.store.manifest import DispatchSummary


def overhead(run_dir: Path) -> dict[str, float | int | None]:
    queued, collected = [], []
    isolation: dict[str, list[float]] = {k: [] for k in ISOLATION}
    for r in store.iter_records(run_dir):
        w = {} if r.worker is None else r.worker.to_dict()
        if {"submitted_at", "started_at", "finished_at", "collected_at"} <= set(w):
            queued.append((w["started_at"] - w["submitted_at"]) * 1000)
            collected.append((w["collected_at"] - w["finished_at"]) * 1000)
        for key, values in isolation.items():
            if isinstance(w.get(key), int | float):
                values.append(w[key] * (1000 if key.endswith("_s") else 1))
    dispatch = store.read_manifest(run_dir).dispatch or DispatchSummary()
    figures: dict[str, float | int | None] = {
        "cells": len(queued),
        "cells_per_minute": dispatch.cells_per_minute,
        "wall_s": dispatch.wall_s,
        "submit_to_start_ms_p50": percentile(queued, 50),
        "submit_to_start_ms_p90": percentile(queued, 90),
        "end_to_record_ms_p50": percentile(collected, 50),
        "end_to_record_ms_p90": percentile(collected, 90),
    }
    for key, values in isolation.items():
        name = ISOLATION[key]
        figures[f"{name}_p50"] = percentile(values, 50) if values else None
        figures[f"{name}_p90"] = percentile(values, 90) if values else None
        figures[f"{name}_max"] = max(values, default=None)
    return figures


# The worker facts of harness.runtime.zygote, and the names their figures take.
ISOLATION = {
    "fork_s": "fork_to_cell_ms",  # the zygote's fork to the child's first line
    "exit_s": "record_to_reaped_ms",  # the child's record sent to the child reaped
    "prepare_s": "zygote_prepare_ms",  # the zygote's work before the fork (0 once warm)
    "cell_uss_mb": "cell_uss_mb",  # memory the cell's process alone held at its end
    "cell_pss_mb": "cell_pss_mb",
    "zygote_rss_mb": "zygote_rss_mb",
}


if __name__ == "__main__":
    print(json.dumps(overhead(Path(sys.argv[1])), indent=2))
