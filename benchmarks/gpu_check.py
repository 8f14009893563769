"""The CUDA path checked on a real GPU (issue 39), in three steps run on the GPU machine by
benchmarks/gpu_session.sh:

    python benchmarks/gpu_check.py probe                  # no Ray: the zygote and its children
    python benchmarks/gpu_check.py runs RUN [RUN ...]     # what the CUDA cells of real runs did
    python benchmarks/gpu_check.py fidelity RUN [RUN ...] # each CUDA cell against plain_cuda.py

`probe` runs CUDA and CPU cells through the harness's own isolation (this process plays
the Ray worker) and says where each ran. `runs` reads records.jsonl as plain JSON (the
record's contract keys), so it reads a run of any harness: the CUDA cells' statuses and
reasons, the providers each ORT session got, and whether two CUDA cells ever ran at once
on the machine's GPUs. `fidelity` times each ok CUDA cell's kept ONNX file and its model in
a fresh process (benchmarks/plain_cuda.py) and prints the ratios the README quotes. Each
step prints one JSON line last.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PLAIN = REPO / "benchmarks" / "plain_cuda.py"


def probe() -> dict[str, Any]:
    import onnxruntime as ort

    from harness.runtime.zygote import run_cell_isolated
    from harness.store.protocol import Protocol
    from harness.store.records import Cell, CellTask
    from harness.zoo.discovery import discover

    quick = Protocol(warmup_min_iters=3, warmup_max_s=0.2, min_iters=10, min_time_s=0.1)
    source = discover().models["mlp_sigmoid"].source
    found: dict[str, Any] = {"ort": ort.__version__, "ort_providers": ort.get_available_providers()}
    order = [("cuda", "dynamo"), ("cpu", "dynamo"), ("cuda", "torchscript"), ("cuda", "dynamo")]
    for i, (device, exporter) in enumerate(order):
        cell = Cell("mlp_sigmoid", exporter, 18, device)
        task = CellTask(cell, source, "probe", f"/tmp/probe-{i}", protocol=quick, timeout_s=300)
        Path(task.run_dir).mkdir(exist_ok=True)
        t0 = time.perf_counter()
        r = run_cell_isolated(task, "0" if device == "cuda" else None)
        found[f"{i}:{device}:{exporter}"] = {
            "status": str(r.status),
            "reason": r.reason or r.error_message,
            "providers": r.ort.runtime.providers if r.ort.runtime else None,
            "ort_p50_ms": r.ort.latency.p50 if r.ort.latency else None,
            "eager_p50_ms": r.eager.latency.p50 if r.eager.latency else None,
            "peak_cuda_mb": r.export.peak_cuda_mb,
            "host_transfers": r.ort.host_transfers,  # None on the CPU; counted on CUDA
            "wall_s": round(time.perf_counter() - t0, 2),
        }
    return found


def _records(run: Path) -> list[dict[str, Any]]:
    lines = (run / "records.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _label(r: dict[str, Any]) -> str:
    shape = "dynamic" if r.get("dynamic") else "static"
    return f"{r['model']}/{r['exporter']}/op{r['opset']}/{r['device']}/{shape}"


def _overlaps(cuda: list[dict[str, Any]]) -> int:
    """How many pairs of CUDA cells ran at the same time (by their workers' clocks)."""
    spans = sorted(
        (w["started_at"], w["finished_at"])
        for w in (r.get("worker") or {} for r in cuda)
        if w.get("started_at") and w.get("finished_at")
    )
    return sum(1 for a, b in itertools.pairwise(spans) if b[0] < a[1])


def runs(paths: list[Path]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for run in paths:
        records = _records(run)
        cuda = [r for r in records if r["device"] == "cuda"]
        providers = Counter(
            ",".join((r.get("ort_runtime") or {}).get("providers") or ["<none>"])
            for r in cuda
            if r["status"] == "ok"
        )
        found[run.name] = {
            "cells": len(records),
            "statuses": dict(Counter(f"{r['device']}:{r['status']}" for r in records)),
            "cuda_providers_of_ok_cells": dict(providers),
            "cuda_not_ok": {
                _label(r): r.get("reason") or r.get("error_message")
                for r in cuda
                if r["status"] not in ("ok", "xfail")
            },
            "cuda_overlapping_pairs": _overlaps(cuda),
            "dispatch": json.loads((run / "manifest.json").read_text()).get("dispatch"),
            "cuda_cell_s": _spread([r.get("duration_s") for r in cuda]),
            "cuda_timeouts": sum(r["status"] == "timeout" for r in cuda),
            "cuda_peak_cuda_mb_missing": sum(
                r["status"] == "ok" and r.get("export_peak_cuda_mb") is None for r in cuda
            ),
        }
    return found


def _spread(values: list[float | None]) -> dict[str, float] | None:
    known = sorted(v for v in values if v is not None)
    if not known:
        return None
    return {"median": statistics.median(known), "min": known[0], "max": known[-1]}


def _plain(run: Path, r: dict[str, Any], sources: dict[str, str]) -> dict[str, Any]:
    args = ["--onnx", str(run / r["artifacts"]["onnx"]), "--source", sources[r["model"]]]
    args += ["--model", r["model"], "--exporter", r["exporter"], "--opset", str(r["opset"])]
    args += ["--device", r["device"], "--seconds", "0.5"]
    done = subprocess.run(
        [sys.executable, str(PLAIN), *args], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def fidelity(paths: list[Path], device: str = "cuda", static_only: bool = True) -> dict[str, Any]:
    from harness.zoo.discovery import discover

    sources = {n: s.source for n, s in discover().models.items()}
    rows: list[dict[str, Any]] = []
    for run in paths:
        for r in _records(run):
            if r["device"] != device or r["status"] != "ok" or "onnx" not in r["artifacts"]:
                continue
            if static_only and r.get("dynamic"):
                continue
            plain = _plain(run, r, sources)
            row = {"cell": _label(r), **plain}
            if "error" not in plain:
                row["ort_ratio"] = r["ort_latency_ms"]["p50"] / plain["ort_p50_ms"]
                row["eager_ratio"] = r["eager_latency_ms"]["p50"] / plain["eager_p50_ms"]
                row["harness_ort_p50_ms"] = r["ort_latency_ms"]["p50"]
                row["harness_eager_p50_ms"] = r["eager_latency_ms"]["p50"]
                row["harness_peak_cuda_mb"] = r.get("export_peak_cuda_mb")
                if row["harness_peak_cuda_mb"] and plain["export_peak_cuda_mb"]:
                    row["peak_ratio"] = row["harness_peak_cuda_mb"] / plain["export_peak_cuda_mb"]
            rows.append(row)
            print(json.dumps(row), flush=True)
    return {"cells": len(rows), **_medians(rows)}


def _medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("ort_ratio", "eager_ratio", "peak_ratio")
    return {key: _spread([row.get(key) for row in rows]) for key in keys}


def main() -> None:
    step, paths = sys.argv[1], [Path(p) for p in sys.argv[2:]]
    result = {
        "probe": probe,
        "runs": lambda: runs(paths),
        "fidelity": lambda: fidelity(paths),
        "fidelity-cpu": lambda: fidelity(paths, device="cpu"),  # a dry run without a GPU
    }
    print(json.dumps({step: result[step]()}))


if __name__ == "__main__":
    main()
