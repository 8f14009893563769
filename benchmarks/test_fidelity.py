"""Are the harness's figures the figures a careful engineer would measure by hand?

Latency: each ok cell's ORT p50 against a minimal timing loop in a fresh process (same
ONNX file, same inputs, same threads): median ratio within 1 +- 0.1.
Memory: each cell's export peak RSS against the same export in a fresh process measured
by the kernel's VmHWM: median ratio within 1 +- 0.25 (over cells whose peak is at least
MIN_PEAK_MB: below that, page-granularity noise dominates the ratio)."""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks.conftest import Figures, harness, plain
from harness import store
from harness.zoo import discover

MIN_PEAK_MB = 8.0


def test_latency_fidelity_smoke(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "smoke"
    benchmark.pedantic(
        lambda: harness("run", "--suite", "smoke", "--keep-onnx", "--out", str(out), "--no-report"),
        rounds=1,
        iterations=1,
    )
    sources = {n: s.source for n, s in discover().models.items()}
    rows, ratios = [], []
    for r in store.read_records(out):
        if r.status != "ok" or r.ort_latency_ms is None:
            continue
        mine = plain(
            "plain_latency.py",
            "--onnx",
            str(out / r.artifacts["onnx"]),
            "--source",
            sources[r.model],
            "--model",
            r.model,
        )
        ratio = r.ort_latency_ms.p50 / mine["p50_ms"]
        ratios.append(ratio)
        rows.append(
            f"| {r.cell.label()} | {r.ort_latency_ms.p50:.4f} | {mine['p50_ms']:.4f} | {ratio:.3f} |"
        )
    median = statistics.median(ratios)
    benchmark.extra_info.update(median_ratio=median, cells=len(ratios))
    figures.add(
        "Latency fidelity (smoke, ORT p50: harness vs fresh-process loop)",
        [
            f"median ratio {median:.3f} over {len(ratios)} cells (target 1 +- 0.1)",
            "",
            "| cell | harness p50 ms | plain p50 ms | ratio |",
            "|---|---|---|---|",
            *rows,
        ],
    )
    assert abs(median - 1) <= 0.1


def test_memory_fidelity_vision(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "vision"
    benchmark.pedantic(
        lambda: harness(
            "run",
            "--suite",
            "vision",
            "--opsets",
            "18",
            "--static-only",
            "--out",
            str(out),
            "--no-report",
        ),
        rounds=1,
        iterations=1,
    )
    sources = {n: s.source for n, s in discover().models.items()}
    rows, ratios = [], []
    for r in store.read_records(out):
        if r.export_peak_rss_mb is None:
            continue
        mine = plain(
            "plain_memory.py",
            "--source",
            sources[r.model],
            "--model",
            r.model,
            "--exporter",
            r.exporter,
            "--opset",
            str(r.opset),
        )
        counted = mine["peak_mb"] >= MIN_PEAK_MB
        ratio = r.export_peak_rss_mb / mine["peak_mb"] if mine["peak_mb"] > 0 else float("nan")
        if counted:
            ratios.append(ratio)
        rows.append(
            f"| {r.cell.label()} | {r.export_peak_rss_mb:.1f} | {mine['peak_mb']:.1f} | {ratio:.2f} |"
            f" {'' if counted else 'below ' + str(MIN_PEAK_MB) + ' MiB, not counted'} |"
        )
    median = statistics.median(ratios)
    benchmark.extra_info.update(median_ratio=median, cells=len(ratios))
    figures.add(
        "Memory fidelity (vision static, opset 18: export peak RSS, harness vs fresh process VmHWM)",
        [
            f"median ratio {median:.3f} over {len(ratios)} cells with peak >= {MIN_PEAK_MB} MiB (target 1 +- 0.25)",
            "",
            "| cell | harness MiB | plain MiB | ratio | note |",
            "|---|---|---|---|---|",
            *rows,
        ],
    )
    assert abs(median - 1) <= 0.25
