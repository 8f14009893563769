"""`harness run`'s core: manifest, dispatch, records as they arrive, reports at the end."""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from harness.plan.build import RunPlan, pending_cells
from harness.store import environment
from harness.store import rundir as store
from harness.store.records import SCHEMA, Cell, CellTask, Record
from harness.store.rundir import RecordWriter
from harness.store.status import Status


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def build_manifest(plan: RunPlan, argv: list[str]) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "run_id": plan.run_id,
        "started": now_iso(),
        "finished": None,
        "command": argv,
        "suite": plan.suite_name,
        "harness": environment.harness_info(),
        "versions": {"base": environment.versions()},
        "hardware": environment.hardware(),
        "settings": {
            "threads": plan.options.threads,
            "timeout_s": plan.options.timeout_s,
            "keep_onnx": plan.options.keep_onnx,
            "protocol": vars(plan.protocol),
        },
        "matrix": plan.matrix.announcement,
        "cells": len(plan.matrix),
        "options": plan.options.to_dict(),
        "zoo_problems": [vars(p) for p in plan.zoo_problems],
    }


@dataclass
class Progress:
    """One line per finished cell on stderr: done/total, failures so far, elapsed."""

    total: int
    stream: TextIO = sys.stderr
    done: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.perf_counter)

    @property
    def failures(self) -> int:
        return sum(n for s, n in self.statuses.items() if not Status(s).passing)

    def update(self, record: Record) -> None:
        self.done += 1
        self.statuses[record.status] += 1
        elapsed = time.perf_counter() - self.started
        took = f"{record.duration_s:.1f}s" if record.duration_s is not None else "-"
        width = len(str(self.total))
        print(
            f"[{self.done:>{width}}/{self.total}] {record.status:<17} {record.cell.label():<50} {took:>7}"
            f" | failures {self.failures} | {_clock(elapsed)}",
            file=self.stream,
            flush=True,
        )


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def execute(
    plan: RunPlan, argv: list[str], *, resume: bool = False, stream: TextIO = sys.stderr
) -> Path:
    """Run every pending cell of the plan; returns the run directory."""
    from harness import dispatch  # ray is imported only when a run really starts

    run_dir = plan.run_dir
    done = _done_keys(run_dir) if resume else set()
    manifest = store.read_manifest(run_dir) if resume else build_manifest(plan, argv)
    cells = pending_cells(plan, done)
    print(plan.matrix.announcement, file=stream)
    if done:
        print(
            f"resuming {run_dir}: {len(done)} cells already recorded, {len(cells)} to run",
            file=stream,
        )
    for problem in plan.zoo_problems:
        print(f"warning: zoo file {problem.source} failed to import: {problem.error}", file=stream)
    cluster = dispatch.start(
        plan.options.address, env_vars=harness_env()
    )  # before anything is written
    slots = dispatch.slots(plan.options.threads)
    manifest["cluster"] = {
        "address": cluster.address,
        "nodes": cluster.nodes,
        "resources": cluster.resources,
    }
    manifest["versions"] = dispatch.variant_versions({"base": (), **plan.variants})
    manifest["settings"]["max_memory_gb"] = max_memory_gb(
        plan, slots, manifest["hardware"].get("memory_gb")
    )
    store.write_manifest(run_dir, manifest)
    progress = Progress(total=len(cells), stream=stream)
    try:
        with RecordWriter(run_dir) as writer:

            def on_record(record: Record) -> None:
                spec = plan.specs.get(record.model)
                record = spec.judge(record) if spec else record
                writer.write(record)
                progress.update(record)

            runnable = _skip_without_gpus(plan, cells, dispatch.has_gpus(), on_record)
            stats = dispatch.run_tasks(
                _tasks(plan, runnable, manifest["settings"]["max_memory_gb"]),
                on_record,
                timeout_s=plan.options.timeout_s,
                max_in_flight=slots,
                variants=plan.variants,
            )
    finally:
        dispatch.stop()
    manifest["finished"] = now_iso()
    wall = time.perf_counter() - stats.started
    manifest["dispatch"] = {
        "submitted": stats.submitted,
        "completed": stats.completed,
        "retried": stats.retried,
        "clean_reruns": stats.clean_reruns,
        "max_in_flight": stats.max_in_flight,
        "peak_in_flight": stats.peak_in_flight,
        "driver_peak_rss_mb": driver_peak_rss_mb(),
        "wall_s": round(wall, 3),
        "cells_per_minute": round(stats.completed / max(1e-9, wall) * 60, 2),
    }
    store.write_manifest(run_dir, manifest)
    return run_dir


def driver_peak_rss_mb() -> float:
    """This process's peak RSS so far (the kernel's high-water mark), in MiB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def harness_env() -> dict[str, str]:
    """HARNESS_* variables of the driver, passed on to every worker (also on a cluster)."""
    return {k: v for k, v in os.environ.items() if k.startswith("HARNESS_")}


def max_memory_gb(plan: RunPlan, slots: int, machine_gb: float | None) -> float | None:
    """The per-cell allowance: the flag, else 90% of the machine shared by the slots."""
    if plan.options.max_memory_gb is not None:
        return plan.options.max_memory_gb
    if not machine_gb:
        return None
    return round(machine_gb * 0.9 / max(1, slots), 2)


def _skip_without_gpus(
    plan: RunPlan, cells: list[Cell], has_gpus: bool, on_record: Any
) -> list[Cell]:
    """CUDA cells on a cluster without GPUs are recorded as skipped, not left unschedulable."""
    if has_gpus:
        return cells
    for cell in (c for c in cells if c.device == "cuda"):
        on_record(
            Record.without_run(
                cell, plan.run_id, status=Status.SKIPPED, reason="no GPU in the Ray cluster"
            )
        )
    return [c for c in cells if c.device != "cuda"]


def _done_keys(run_dir: Path) -> set[tuple[Any, ...]]:
    store.truncate_torn_tail(run_dir)
    return {r.cell.key for r in store.iter_records(run_dir)}


def _tasks(plan: RunPlan, cells: list[Cell], max_memory: float | None) -> Iterator[CellTask]:
    for cell in cells:
        yield CellTask(
            cell=cell,
            source=plan.specs[cell.model].source,
            run_id=plan.run_id,
            run_dir=str(plan.run_dir.resolve()),
            threads=plan.options.threads,
            keep_onnx=plan.options.keep_onnx,
            protocol=plan.protocol,
            max_memory_gb=max_memory,
        )
