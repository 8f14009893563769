"""Cells timed beside other cells' work against the same cells timed with nothing beside
(issue 47; harness.cell.node): real-size models run by the suite on a local Ray instance of
this machine's cores (each 1-thread export and loop on a core of its own, beside the other
cell's work) and on a Ray instance of 1 CPU (one cell at a time, nothing beside), in the
order beside, alone, alone, beside. Per cell, the ratio beside / alone of the export's
seconds, its peak RSS and the record's ORT p50 (each side the median of its runs, with the
range of the ratios of the runs paired in time), and each run's wall time with the host's
MatMul rate before it.

    python -m benchmarks.beside_alone OUT_DIR --models real.bert_base,real.vit_base
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ray.cluster_utils import Cluster

from harness.store import rundir
from harness.store.records import Record

ORDER = ("beside", "alone", "alone", "beside")
FIGURES: dict[str, Callable[[Record], float | None]] = {
    "export s": lambda r: r.export.seconds,
    "export peak RSS": lambda r: r.export.peak_rss_mb,
    "ORT p50": lambda r: r.ort.latency.p50 if r.ort.latency else None,
}


def run(out: Path, models: str, mode: str) -> float:
    """One run of the suite's `models` into `out`, beside or alone; its wall seconds."""
    command = ["harness", "run", "--suite", "real-size", "--models", models, "--out", str(out)]
    gemm = subprocess.run(
        [sys.executable, "-m", "benchmarks.gemm_rate", "--calls", "20"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    start = time.perf_counter()
    if mode == "beside":
        subprocess.run(command, check=True)
    else:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        try:
            subprocess.run([*command, "--address", cluster.address], check=True)
        finally:
            cluster.shutdown()
    seconds = time.perf_counter() - start
    print(f"{out.name}: {seconds:.0f} s, MatMul before: {gemm.stdout.strip()}", flush=True)
    return seconds


def figures(runs: list[Path]) -> dict[str, dict[str, list[float]]]:
    """Per cell label, each figure's values, one per run (in the runs' order)."""
    found: dict[str, dict[str, list[float]]] = {}
    for run_dir in runs:
        for r in rundir.iter_records(run_dir):
            for name, read in FIGURES.items():
                if (value := read(r)) is not None:
                    found.setdefault(r.cell.label(), {}).setdefault(name, []).append(value)
    return found


def table(beside: list[Path], alone: list[Path]) -> list[str]:
    """A row per cell: each figure's beside / alone (medians) and the paired runs' range."""
    b, a = figures(beside), figures(alone)
    rows = ["| cell | " + " | ".join(FIGURES) + " |", "|---" * (len(FIGURES) + 1) + "|"]
    for cell in sorted(b.keys() & a.keys()):
        cells = []
        for name in FIGURES:
            x, y = b[cell].get(name, []), a[cell].get(name, [])
            if not x or not y:
                cells.append("—")
                continue
            paired = [p / q for p, q in zip(x, y, strict=False)]
            ratio = statistics.median(x) / statistics.median(y)
            cells.append(f"{ratio:.2f} ({min(paired):.2f}-{max(paired):.2f})")
        rows.append(f"| {cell} | " + " | ".join(cells) + " |")
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--models", required=True, help="the suite's models, comma-separated")
    a = p.parse_args()
    dirs: dict[str, list[Path]] = {"beside": [], "alone": []}
    for i, mode in enumerate(ORDER):
        out = a.out / f"{i + 1}-{mode}"
        run(out, a.models, mode)
        dirs[mode].append(out)
    print("\n".join(table(dirs["beside"], dirs["alone"])))


if __name__ == "__main__":
    main()
