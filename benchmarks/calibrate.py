"""Calibrating `harness compare` on repeated runs of the same versions (issue 4).

- A/A false alarms: every pair of consecutive runs is compared with the default
  thresholds; any blocking finding or warning between two runs of one build is a false
  alarm.
- Smallest slowdown caught: for each A/A pair and each cell in turn, that cell's ORT
  latency samples in the second run are multiplied by a factor (only that cell: a
  regression in one model, not a machine-wide shift, which the comparison divides out),
  and the pair is judged again. A cell's slowdown is caught when the comparison reports a
  blocking ORT-latency regression for it. The samples are the runs' own, so the noise
  is real; only the slowdown is synthetic.

    PYTHONPATH=. python benchmarks/calibrate.py RUN_DIR RUN_DIR [RUN_DIR...] [--figures]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.compare import BLOCKING, WARNING, Thresholds, compare_runs
from harness.compare.against_run import cell_finding_against_run, paired_samples, run_drift
from harness.compare.metrics import METRICS, NotCompared
from harness.store.records import Record
from harness.store.runs import Run, read_run

SLOWDOWNS = (1.05, 1.10, 1.20, 1.30, 1.50, 2.00, 2.50, 3.00)


def pairs(runs: Sequence[Run]) -> list[tuple[Run, Run]]:
    return list(itertools.pairwise(runs))


def false_alarms(runs: Sequence[Run]) -> dict[str, Any]:
    """Per consecutive pair: blocking findings and warnings (by kind) out of the cells."""
    rows = []
    for base, cand in pairs(runs):
        c = compare_runs(base, cand)
        alarms = [f for f in c.findings if f.severity in (BLOCKING, WARNING)]
        rows.append(
            {
                "pair": f"{base.run_id} -> {cand.run_id}",
                "cells": len(c.cells),
                "blocking": len(c.blocking),
                "warnings": sum(f.severity == WARNING for f in c.findings),
                "alarms": dict(Counter(f"{f.kind}:{f.metric or ''}" for f in alarms)),
                "info": sum(f.severity not in (BLOCKING, WARNING) for f in c.findings),
            }
        )
    cells = sum(r["cells"] for r in rows)
    alarms = sum(r["blocking"] + r["warnings"] for r in rows)
    return {
        "pairs": rows,
        "cell_comparisons": cells,
        "alarms": alarms,
        "rate": alarms / max(1, cells),
    }


ORT_LATENCY = next(m for m in METRICS if m.name == "ort_latency")


@dataclass(frozen=True)
class TimedPair:
    """One cell's ORT latency samples in both runs of an A/A pair."""

    record: Record
    base: tuple[float, ...]
    cand: tuple[float, ...]

    @property
    def log_ratio(self) -> float:
        return math.log(statistics.median(self.cand) / statistics.median(self.base))


def timed_pairs(base: Run, cand: Run) -> dict[tuple, TimedPair]:
    """The cells whose ORT latency compare judges, paired by compare's own rules."""
    b, c = base.by_cell(), cand.by_cell()
    out = {}
    for k in sorted(b.keys() & c.keys()):
        if samples := paired_samples(ORT_LATENCY, b[k], c[k], NotCompared()):
            out[k] = TimedPair(c[k], *samples)
    return out


def caught(cells: dict[tuple, TimedPair], key: tuple, factor: float, t: Thresholds) -> bool:
    """Whether slowing `key` alone down by `factor` is a blocking ORT-latency finding; the
    run-wide shift and noise are estimated with the slowed cell among the others, as
    compare does."""
    logs = [p.log_ratio + (math.log(factor) if k == key else 0.0) for k, p in cells.items()]
    p = cells[key]
    slowed = [x * factor for x in p.cand]
    f = cell_finding_against_run(ORT_LATENCY, p.record, p.base, slowed, t, run_drift(logs, t))
    return f is not None and f.severity == BLOCKING


def detection(
    runs: Sequence[Run], slowdowns: Sequence[float] = SLOWDOWNS, t: Thresholds | None = None
) -> dict[str, Any]:
    """Share of (pair, cell) cases whose injected slowdown is caught, per factor."""
    t = t or Thresholds()
    by_factor: dict[float, list[bool]] = {s: [] for s in slowdowns}
    never: Counter[str] = Counter()
    for base, cand in pairs(runs):
        cells = timed_pairs(base, cand)
        for key, p in cells.items():
            hits = [caught(cells, key, s, t) for s in slowdowns]
            for s, hit in zip(slowdowns, hits, strict=True):
                by_factor[s].append(hit)
            if not any(hits):
                never[p.record.cell.label()] += 1
    shares = {f"{s:.2f}": sum(v) / len(v) for s, v in by_factor.items() if v}
    return {
        "cases": len(by_factor[slowdowns[0]]),
        "caught_share": shares,
        "smallest_caught_90": _smallest(shares, 0.9),
        "smallest_caught_all": _smallest(shares, 1.0),
        "never_caught": dict(never),
    }


def _smallest(shares: dict[str, float], share: float) -> float | None:
    hits = [float(s) for s, v in shares.items() if v >= share]
    return min(hits) if hits else None


def noise(runs: Sequence[Run]) -> dict[str, Any]:
    """Coefficient of variation of each ok cell's ORT p50 across the runs."""
    p50s: dict[tuple, list[float]] = {}
    labels: dict[tuple, str] = {}
    for run in runs:
        for r in run.records:
            if r.status in ("ok", "xpass") and r.ort.latency is not None:
                p50s.setdefault(r.cell.key, []).append(r.ort.latency.p50)
                labels[r.cell.key] = r.cell.label()
    cvs = {
        k: statistics.stdev(v) / statistics.mean(v) for k, v in p50s.items() if len(v) == len(runs)
    }
    worst = max(cvs, key=lambda k: cvs[k])
    return {
        "cells": len(cvs),
        "median_cv": statistics.median(cvs.values()),
        "p90_cv": statistics.quantiles(cvs.values(), n=10)[-1] if len(cvs) > 1 else cvs[worst],
        "worst_cv": cvs[worst],
        "worst_cell": labels[worst],
    }


def noise_lines(spread: dict[str, Any], runs: int) -> list[str]:
    return [
        f"coefficient of variation of ORT p50 per cell: median {spread['median_cv']:.2%},"
        f" 90th percentile {spread['p90_cv']:.2%}, worst {spread['worst_cv']:.2%}"
        f" ({spread['worst_cell']}), over {spread['cells']} cells and {runs} runs"
    ]


def calibration_lines(aa: dict[str, Any], caught: dict[str, Any]) -> list[str]:
    shares = " | ".join(f"{float(s) - 1:+.0%}: {v:.0%}" for s, v in caught["caught_share"].items())
    return [
        f"A/A false alarms (blocking or warning): {aa['alarms']} over {aa['cell_comparisons']}"
        f" cell comparisons in {len(aa['pairs'])} pairs ({aa['rate']:.2%})",
        *[
            f"- {p['pair']}: {p['blocking']} blocking, {p['warnings']} warnings {p['alarms'] or ''}"
            for p in aa["pairs"]
        ],
        "",
        f"one model slowed down alone, share of {caught['cases']} (pair, cell) cases caught as"
        f" blocking: {shares}",
        f"smallest slowdown caught in >= 90% of cases: {_pct(caught['smallest_caught_90'])};"
        f" in all: {_pct(caught['smallest_caught_all'])}",
    ]


def _pct(factor: float | None) -> str:
    return "none of those tried" if factor is None else f"{factor - 1:+.0%}"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument(
        "--figures", action="store_true", help="also update benchmarks/results/summary.md"
    )
    a = p.parse_args()
    runs = [read_run(d) for d in a.runs]
    spread, aa, caught = noise(runs), false_alarms(runs), detection(runs)
    print(json.dumps({"noise": spread, "aa": aa, "detection": caught}, indent=2))
    if a.figures:
        from benchmarks.conftest import Figures

        figures = Figures()
        figures.add(
            f"Noise (vision, ORT p50 over {len(runs)} runs)", noise_lines(spread, len(runs))
        )
        figures.add("Alert calibration (vision, default thresholds)", calibration_lines(aa, caught))
        figures.write()


if __name__ == "__main__":
    main()
