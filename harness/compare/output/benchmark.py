"""The candidate run in pytest-benchmark's JSON format (benchmark.json), with the same
statistics its `Stats` computes."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from harness.store.environment import installed_version
from harness.store.manifest import Hardware
from harness.store.records import Record
from harness.store.runs import Run


def to_pytest_benchmark(run: Run) -> dict[str, object]:
    """The candidate's ok cells as pytest-benchmark JSON (seconds): ORT and eager latency
    samples and export time, readable by `pytest-benchmark compare` and github-action-benchmark."""
    m, base = run.manifest, run.versions()
    hw, written = m.hardware or Hardware(), m.to_dict()
    return {
        "machine_info": {
            "node": hw.extra.get("node") or "", "processor": hw.cpu or "", "machine": hw.machine or "",
            "python_implementation": "CPython", "python_version": base.get("python") or "",
            "system": hw.system or "", "cpu": {"brand_raw": hw.cpu or "", "count": hw.cores},
            "harness_hardware": written["hardware"] or {}, "harness_settings": written["settings"] or {},
        },
        "commit_info": {
            "id": (m.harness and m.harness.git_sha) or "unknown", "time": None, "author_time": None, "dirty": False,
            "project": "onnx-export-harness", "branch": "(unknown)",
        },
        "benchmarks": [b for r in run.records if r.status.exported for b in _benchmarks_of(run, r)],
        "datetime": m.finished or run.started,
        "version": installed_version("pytest-benchmark") or "5.0.0",
    }  # fmt: skip


def benchmark_stats(data: Sequence[float]) -> dict[str, object]:
    """pytest-benchmark's `stats` block for samples in seconds (same definitions as its Stats)."""
    d, n = sorted(data), len(data)
    mean = statistics.mean(d)
    sd = statistics.stdev(d) if n > 1 else 0.0
    q1, q3 = _quartiles(d)
    iqr = q3 - q1
    low, high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    iqr_out = sum(1 for x in d if x < low or x > high)
    sd_out = sum(1 for x in d if x < mean - sd or x > mean + sd)
    total = math.fsum(d)
    return {
        "min": d[0], "max": d[-1], "mean": mean, "stddev": sd, "rounds": n,
        "median": statistics.median(d), "iqr": iqr, "q1": q1, "q3": q3,
        "iqr_outliers": iqr_out, "stddev_outliers": sd_out, "outliers": f"{sd_out};{iqr_out}",
        "ld15iqr": next(x for x in d if x >= low) if n > 1 else d[0],
        "hd15iqr": [x for x in d if x <= high][-1] if n > 1 else d[0],
        "ops": n / total if total else 0, "total": total, "data": list(data), "iterations": 1,
    }  # fmt: skip


def _quartiles(data: Sequence[float]) -> tuple[float, float]:
    """Q1 and Q3 as pytest-benchmark computes them (Wikipedia methods 2 and 3)."""
    d, n = sorted(data), len(data)
    if n == 1:
        return d[0], d[0]
    if n % 2 == 0:
        return statistics.median(d[: n // 2]), statistics.median(d[n // 2 :])
    m, q = n // 4, n % 4
    if q == 1:
        return 0.25 * d[m - 1] + 0.75 * d[m], 0.75 * d[3 * m] + 0.25 * d[3 * m + 1]
    return 0.75 * d[m] + 0.25 * d[m + 1], 0.25 * d[3 * m + 1] + 0.75 * d[3 * m + 2]


def _benchmarks_of(run: Run, r: Record) -> list[dict[str, object]]:
    out = []
    for metric, lat in (("ort_latency", r.ort.latency), ("eager_latency", r.eager.latency)):
        if lat is not None and (lat.samples or lat.p50):
            out.append(_benchmark(run, r, metric, [s / 1000 for s in (lat.samples or (lat.p50,))]))
    if r.export.seconds is not None:
        out.append(_benchmark(run, r, "export_time", [r.export.seconds]))
    return out


def _benchmark(run: Run, r: Record, metric: str, seconds: Sequence[float]) -> dict[str, object]:
    cell = r.cell
    return {
        "group": metric,
        "name": f"{metric}[{cell.cell_id}]",
        "fullname": f"{run.manifest.suite or 'harness'}::{metric}[{cell.cell_id}]",
        "params": {
            "model": cell.model,
            "exporter": cell.exporter,
            "opset": cell.opset,
            "device": cell.device,
            "dynamic": cell.dynamic,
            "variant": cell.variant,
        },
        "param": cell.cell_id,
        "extra_info": {
            "run_id": run.run_id,
            "family": r.family,
            "opset_actual": r.export.opset_actual,
            **{
                k: v
                for k, v in run.versions(r.variant).items()
                if k in ("torch", "onnxscript", "onnxruntime")
            },
        },
        "options": {"timer": "harness", "disable_gc": False, "warmup": True},
        "stats": benchmark_stats(seconds),
    }
