"""Builders of synthetic runs (in memory or as run directories) for the compare and history
tests, and lookups of their findings (no torch)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.compare import Comparison, Finding
from harness.store.details import (
    Divergence,
    MinimalRepro,
    MismatchStage,
    OrtRuntime,
    SampleSummary,
    WorkerInfo,
    plain,
)
from harness.store.files import write_inside
from harness.store.manifest import Manifest
from harness.store.measures import EagerMeasures, ExportMeasures, Group, Numerics, OrtMeasures
from harness.store.records import Cell, Latency, Measurements, OutputCheck, Record
from harness.store.rundir import MANIFEST, RecordWriter
from harness.store.runs import Run

HARDWARE = {"cpu": "Test CPU @ 3.0GHz", "cores": 8, "memory_gb": 32.0, "gpus": []}


def manifest(
    run_id: str,
    started: str = "2025-01-01T00:00:00+00:00",
    *,
    torch: str = "2.9.0",
    hardware: dict[str, Any] | None = None,
    threads: int = 2,
    schema: int = 1,
) -> dict[str, Any]:
    return {
        "schema": schema,
        "run_id": run_id,
        "started": started,
        "finished": started,
        "command": ["harness", "run"],
        "suite": "synthetic",
        "harness": {"version": "0.1.0", "git_sha": "abc123"},
        "versions": {
            "base": {
                "python": "3.11.9",
                "torch": torch,
                "onnx": "1.17.0",
                "onnxscript": "0.5.0",
                "onnxruntime": "1.20.0",
                "ray": "2.40.0",
            }
        },
        "hardware": dict(hardware or HARDWARE),
        "settings": {
            "threads": threads,
            "timeout_s": 600,
            "protocol": {"min_iters": 50, "min_seconds": 1.0},
        },
        "cells": 0,
    }


def typed_manifest(run_id: str, **kw: Any) -> Manifest:
    """`manifest(...)` as the readers see it."""
    return Manifest.from_dict(manifest(run_id, **kw))


def samples(rng: random.Random, median: float, rel_sigma: float, n: int = 60) -> list[float]:
    """Log-normal latency samples around `median`."""
    return [median * math.exp(rng.gauss(0.0, rel_sigma)) for _ in range(n)]


def record(
    model: str = "m",
    exporter: str = "dynamo",
    opset: int = 18,
    *,
    run_id: str = "r",
    status: str = "ok",
    stage: str | None = None,
    error: BaseException | None = None,
    ort: list[float] | None = None,
    eager: list[float] | None = None,
    export_s: float | None = None,
    rss_mb: float | None = None,
    numerics: list[OutputCheck] | None = None,
    aten_ops: dict[str, int] | None = None,
    unsupported_ops: list[str] | None = None,
    opset_actual: int | None = None,
    dynamic: bool = False,
) -> Record:
    measured = measurements(
        opset_actual=opset_actual,
        export_s=export_s,
        export_peak_rss_mb=rss_mb,
        aten_ops=aten_ops,
        unsupported_ops=unsupported_ops,
        numerics=numerics,
        ort_latency_ms=Latency.from_samples(ort) if ort else None,
        eager_latency_ms=Latency.from_samples(eager) if eager else None,
    )
    cell = Cell(model, exporter, opset, dynamic=dynamic, family="test")
    return Record.finished(cell, run_id, measured, status=status, stage=stage, error=error)


_PARTS = {
    "first_divergence": Divergence,
    "mismatch_stage": MismatchStage,
    "ort_runtime": OrtRuntime,
}


def measurements(**flat: Any) -> Measurements:
    """Measurements named by the record's flat field names (`export_s=1.5`, `numerics=[...]`,
    `first_divergence={...}`), as the tests write them; the rest (`artifacts`, `samples`,
    `shape_latency`) as `Measurements` names them."""
    for name, part in _PARTS.items():
        if isinstance(flat.get(name), dict):
            flat[name] = part.from_dict(flat[name])

    def pick(names: Mapping[str, str]) -> dict[str, Any]:
        return {names[k]: flat.pop(k) for k in list(flat) if k in names}

    return Measurements(
        export=ExportMeasures(**pick(ExportMeasures.FLAT)),
        ort=OrtMeasures(**pick(OrtMeasures.FLAT)),
        eager=EagerMeasures(**pick(EagerMeasures.FLAT)),
        numerics=Numerics(**pick(Numerics.FLAT)),
        **flat,
    )


def changed(record: Record, **flat: Any) -> Record:
    """`record` with fields changed by their flat names in `records.jsonl` (`export_s=2.0`,
    `ort_latency_ms=Latency(...)`, `samples={...}`): each group re-read from its flat keys
    (`Group.from_flat`), the other parts from their JSON."""
    line = {k: plain(v) for k, v in flat.items()}
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(Record):
        if isinstance(f.default, Group) and line.keys() & f.default.FLAT.keys():
            group = getattr(record, f.name)
            changes[f.name] = group.from_flat({**group.to_flat(), **line})
    for key, value in line.items():
        if not any(
            key in f.default.FLAT
            for f in dataclasses.fields(Record)
            if isinstance(f.default, Group)
        ):
            read = _READ.get(key)
            changes[key] = value if read is None or value is None else read(value)
    return dataclasses.replace(record, **changes)


_READ = {"minimal_repro": MinimalRepro.from_dict, "samples": SampleSummary.from_dict}
_READ["worker"] = WorkerInfo.from_dict


def check(name: str = "out0", *, max_abs: float = 1e-6, ok: bool = True) -> OutputCheck:
    return OutputCheck(
        name=name, max_abs=max_abs, max_rel=max_abs, rmse=max_abs / 2, rtol=1e-3, atol=1e-4, ok=ok
    )


def smoke_cells(seed: int, *, slow: float = 1.0, broken: bool = False) -> list[Record]:
    """Three ok cells timed around 2 ms (x `slow`), and a fourth that exports, or fails
    at translate on aten.cummax (`broken`): a small suite's night."""
    rng = random.Random(seed)
    ok = [
        record(
            f"m{i}",
            ort=samples(rng, 2.0 * slow, 0.03),
            eager=samples(rng, 4.0, 0.03),
            export_s=3.0,
            rss_mb=300.0,
            opset_actual=18,
        )
        for i in range(3)
    ]
    if not broken:
        return [*ok, record("m3", export_s=1.0)]
    failed = record(
        "m3",
        status="export_failed",
        stage="translate",
        error=RuntimeError("no lowering for aten.cummax.default"),
        unsupported_ops=["aten.cummax.default"],
    )
    return [*ok, failed]


def write_run(path: Path, man: dict[str, Any], records: list[Record]) -> Path:
    man = {**man, "cells": len(records)}
    path.mkdir(parents=True, exist_ok=True)  # the JSON as given: a test's may be hostile
    write_inside(path, MANIFEST, json.dumps(man, indent=2) + "\n")
    with RecordWriter(path) as writer:
        for r in records:
            writer.write(r.with_changes(run_id=man["run_id"]))
    return path


def run(run_id: str, records: list[Record], **kw: Any) -> Run:
    """An in-memory run of `records` (no directory), at path results/RUN_ID."""
    return Run(
        typed_manifest(run_id, **kw),
        tuple(r.with_changes(run_id=run_id) for r in records),
        path=f"results/{run_id}",
    )


def kinds(comparison: Comparison, severity: str | None = None) -> list[str]:
    return [f.kind for f in comparison.findings if severity is None or f.severity == severity]


def one(comparison: Comparison, kind: str) -> Finding:
    """The one finding of `kind` (fails the test when there are none or several)."""
    found = [f for f in comparison.findings if f.kind == kind]
    assert len(found) == 1, comparison.findings
    return found[0]
