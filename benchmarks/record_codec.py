"""The record codec alone: N records written as `records.jsonl` lines (`Record.to_json`) and
read back (`rundir.read_records`: JSON, validation, upgrade, the typed record), timed apart.
Run with either checkout on PYTHONPATH to compare two versions of the store:

    PYTHONPATH=. python benchmarks/record_codec.py 100000   # {"write_s": ..., "read_s": ...}
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

from harness.store import rundir
from harness.store.details import ColdStart, Divergence, OrtRuntime, WorkerInfo
from harness.store.measures import (
    EagerMeasures,
    ExportMeasures,
    Latency,
    Numerics,
    OrtMeasures,
    OutputCheck,
)
from harness.store.records import Cell, Record


def sample_records(n: int) -> list[Record]:
    """`n` records as a run writes them: two ok cells fully measured, one failed at export,
    one skipped, in turn."""
    samples = [1.0 + i / 100 for i in range(20)]
    worker = WorkerInfo(
        node="n1", host="box", pid=11, started_at=1.7e9, finished_at=1.7e9 + 3, fork_s=0.01,
        cold_start=ColdStart(exporter="dynamo", opset=18, seconds=1.9, peak_rss_mb=140.0),
    )  # fmt: skip
    measured = {
        "export": ExportMeasures(
            seconds=0.4,
            phases={"capture": 0.2, "translate": 0.2},
            peak_rss_mb=300.0,
            aten_ops={"aten.addmm.default": 3},
            opset_actual=18,
            onnx_bytes=4096,
            onnx_nodes=12,
            onnx_ops={"Gemm": 3, "Relu": 2},
            graph_fingerprint="ab" * 16,
        ),
        "ort": OrtMeasures(
            session_s=0.05,
            latency=Latency.from_samples(samples),
            runtime=OrtRuntime(onnxruntime="1.22", providers=("CPUExecutionProvider",)),
        ),
        "eager": EagerMeasures(latency=Latency.from_samples([s * 2 for s in samples])),
        "numerics": Numerics(
            checks=[OutputCheck("out0", 1e-6, 1e-5, 1e-7, 1e-4, 1e-5, True, mismatches=0)]
        ),
    }
    failed = Numerics(first_divergence=Divergence(node="n3", op_type="Add", max_abs=0.5))
    kinds = [
        lambda c: Record(c, "r", "ok", duration_s=3.0, worker=worker, **measured),
        lambda c: Record(c, "r", "numerics_mismatch", "numerics", numerics=failed, worker=worker),
        lambda c: Record(c, "r", "export_failed", "translate", "E", "boom 1", "boom N"),
        lambda c: Record.without_run(c, "r", status="skipped", reason="expected to fail"),
    ]
    return [
        kinds[i % 4](Cell(f"model_{i}", "dynamo", 18, dynamic=i % 2 == 0, family="f"))
        for i in range(n)
    ]


def write_and_read(records: list[Record], run_dir: Path) -> tuple[float, float]:
    start = time.perf_counter()
    text = "".join(r.to_json() + "\n" for r in records)
    written = time.perf_counter() - start
    rundir.records_path(run_dir).write_text(text)
    start = time.perf_counter()
    back = rundir.read_records(run_dir)
    read = time.perf_counter() - start
    assert len(back) == len(records) and back[-1].to_json() == records[-1].to_json()
    return written, read


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    with tempfile.TemporaryDirectory() as folder:
        write_s, read_s = write_and_read(sample_records(n), Path(folder))
    print(json.dumps({"n": n, "write_s": round(write_s, 3), "read_s": round(read_s, 3)}))
