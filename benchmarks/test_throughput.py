"""Throughput against the plain way: the same cells, each in a fresh Python process one
after another (build, export, check in ORT, time the same number of iterations), against
`harness run` on this machine. Target: the harness takes at most half the plain way's wall
time, with the same results."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from benchmarks.conftest import Figures, harness, plain
from benchmarks.overhead import overhead
from harness.store import rundir as store
from harness.store.records import Record


def _plain_way(records: list[Record], sources: dict[str, str]) -> tuple[float, dict[tuple, str]]:
    statuses: dict[tuple, str] = {}
    start = time.perf_counter()
    for r in records:
        args = [
            "--source",
            sources[r.model],
            "--model",
            r.model,
            "--exporter",
            r.exporter,
            "--opset",
            str(r.opset),
            "--ort-iters",
            str(r.ort.latency.n if r.ort.latency else 20),
            "--eager-iters",
            str(r.eager.latency.n if r.eager.latency else 20),
        ]
        if r.dynamic:
            args.append("--dynamic")
        statuses[r.cell.key] = plain("plain_cell.py", *args)["status"]
    return time.perf_counter() - start, statuses


def _isolation_lines(cost: dict[str, float | int | None]) -> list[str]:
    """Each cell's own process: what the fork and the exit cost, and the memory."""

    def cell(name: str, unit: str) -> str:
        p50, p90, top = (cost.get(f"{name}_{k}") for k in ("p50", "p90", "max"))
        return "—" if p50 is None else f"{p50:.1f} / {p90:.1f} / {top:.1f} {unit}"

    return [
        "| per cell (p50 / p90 / max) | value |",
        "|---|---|",
        f"| fork to the cell's first line | {cell('fork_to_cell_ms', 'ms')} |",
        f"| record sent to process reaped | {cell('record_to_reaped_ms', 'ms')} |",
        f"| zygote's preparation before the fork | {cell('zygote_prepare_ms', 'ms')} |",
        f"| cell process's own memory (USS) | {cell('cell_uss_mb', 'MiB')} |",
        f"| cell process's PSS | {cell('cell_pss_mb', 'MiB')} |",
        f"| zygote's RSS | {cell('zygote_rss_mb', 'MiB')} |",
    ]


def _passed(status: str) -> bool:
    return status in ("ok", "xpass")


@pytest.mark.parametrize("suite", ["smoke", "vision"])
def test_throughput_against_plain_way(
    benchmark, figures: Figures, suite: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / suite
    harness_s = benchmark.pedantic(
        lambda: harness("run", "--suite", suite, "--out", str(out), "--no-report"),
        rounds=1,
        iterations=1,
    )
    records = [r for r in store.read_records(out) if r.exporter in ("dynamo", "torchscript")]
    from harness.zoo.discovery import discover

    sources = {name: spec.source for name, spec in discover().models.items()}
    plain_s, plain_status = _plain_way(records, sources)
    agree = sum(_passed(r.status) == (plain_status[r.cell.key] == "ok") for r in records)
    ratio = harness_s / plain_s
    cost = overhead(out)
    benchmark.extra_info.update(
        {**cost, "cells": len(records), "harness_s": harness_s, "plain_s": plain_s,
         "ratio": ratio, "same_result": agree}
    )  # fmt: skip
    figures.add(
        f"Throughput: {suite}",
        [
            "| cells | harness wall s | plain-way wall s | harness / plain | same pass/fail |",
            "|---|---|---|---|---|",
            f"| {len(records)} | {harness_s:.1f} | {plain_s:.1f} | {ratio:.2f} | {agree}/{len(records)} |",
            "",
            *_isolation_lines(cost),
        ],
    )
    assert ratio <= 0.5, f"harness took {ratio:.2f} of the plain way's wall time"
