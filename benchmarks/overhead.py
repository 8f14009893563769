"""Scheduling overhead of a finished run, read off its records: the time from a cell's
submission to its start in a worker, and from its end to the driver having its record
(written to disk right after). Also the run's throughput.

    python benchmarks/overhead.py RUN_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.stats import percentile
from harness.store import rundir as store


def overhead(run_dir: Path) -> dict[str, float]:
    queued, collected = [], []
    for r in store.iter_records(run_dir):
        w = r.worker or {}
        if {"submitted_at", "started_at", "finished_at", "collected_at"} <= set(w):
            queued.append((w["started_at"] - w["submitted_at"]) * 1000)
            collected.append((w["collected_at"] - w["finished_at"]) * 1000)
    dispatch = store.read_manifest(run_dir).get("dispatch", {})
    return {
        "cells": len(queued),
        "cells_per_minute": dispatch.get("cells_per_minute"),
        "wall_s": dispatch.get("wall_s"),
        "submit_to_start_ms_p50": percentile(queued, 50),
        "submit_to_start_ms_p90": percentile(queued, 90),
        "end_to_record_ms_p50": percentile(collected, 50),
        "end_to_record_ms_p90": percentile(collected, 90),
    }


if __name__ == "__main__":
    print(json.dumps(overhead(Path(sys.argv[1])), indent=2))
