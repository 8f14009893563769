"""The dynamo registry memo over the OpInfo database: each OpInfo's first float32 sample
exported twice in one process, with the memo and without, in alternating order; the two
exports' files must be byte for byte the same. OpInfos go in chunks to child processes (a
sample may crash a process; such an OpInfo is named). Prints one JSON line: how many
exports were compared, how many were identical, which differed, and the median export time
each way.

    PYTHONPATH=. python benchmarks/opinfo_memo.py [--limit N] [--samples K]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import exporters
from harness.cell.shapes import Inputs
from harness.exporters import registry_memo
from harness.exporters.request import ExportRequest
from harness.runtime.warmup import warm_up_exporter
from harness.zoo.generated.opinfo_samples import op_db_index, sample_set


def export(sample: Any, memo: bool, folder: Path) -> tuple[dict[str, str] | str, float]:
    """The digests of the files one export writes (or its error), and its wall time."""
    os.environ[registry_memo.ENV] = "1" if memo else "0"
    folder.mkdir(parents=True)
    request = ExportRequest(
        model=sample.build().eval(),
        inputs=Inputs(tuple(sample.inputs), {}, ()),
        opset=18,
        path=folder / "model.onnx",
        output_names=("output_0",),
    )
    start = time.perf_counter()
    try:
        exporters.get("dynamo").export(request)
    except Exception as exc:
        return f"failed: {type(exc).__name__}", time.perf_counter() - start
    seconds = time.perf_counter() - start
    return {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())
    }, seconds


def compare(ops: list[tuple[str, str]], samples: int) -> dict[str, Any]:
    """In this process: each OpInfo's first `samples` float32 samples, both ways."""
    logging.disable(logging.WARNING)
    warm_up_exporter("dynamo", 18)
    times: dict[str, list[float]] = {"memo": [], "plain": []}
    compared, differ = 0, []
    root = Path(tempfile.mkdtemp(prefix="memo-"))
    for k, (name, variant) in enumerate(ops):
        try:
            chosen = sample_set(name, variant, "float32", max_samples=samples).samples
        except Exception:
            continue
        for s in chosen:
            order = (True, False) if (k + s.index) % 2 == 0 else (False, True)
            got = {}
            for memo in order:
                got[memo], seconds = export(s, memo, root / f"{k}-{s.index}-{memo}")
                times["memo" if memo else "plain"].append(seconds)
            compared += 1
            if got[True] != got[False]:
                differ.append(f"{name}.{variant}[{s.index}]")
        shutil.rmtree(root, ignore_errors=True)
    return {"compared": compared, "differ": differ, "times": times, "memo": registry_memo.stats()}


def orchestrate(ops: list[tuple[str, str]], samples: int, chunk: int) -> dict[str, Any]:
    """Chunks of OpInfos, each in a child process (a sample can crash a process: sparse
    layouts, native kernels); a chunk that dies is retried one OpInfo at a time."""
    results, crashed = [], []
    pending = [ops[i : i + chunk] for i in range(0, len(ops), chunk)]
    while pending:
        part = pending.pop(0)
        found = _child(part, samples)
        if found is not None:
            results.append(found)
        elif len(part) > 1:
            pending[:0] = [[op] for op in part]
        else:
            crashed.append(".".join(filter(None, part[0])))
        print(
            f"{sum(r['compared'] for r in results)} compared; {len(pending)} chunks left",
            file=sys.stderr,
            flush=True,
        )
    memo = [t for r in results for t in r["times"]["memo"]]
    plain = [t for r in results for t in r["times"]["plain"]]
    compared = sum(r["compared"] for r in results)
    differ = [d for r in results for d in r["differ"]]
    return {
        "opinfos": len(ops),
        "exports_compared": compared,
        "identical": compared - len(differ),
        "differ": differ,
        "crashed_opinfos": crashed,
        "median_export_s_memo": statistics.median(memo),
        "median_export_s_plain": statistics.median(plain),
        "mean_export_s_memo": statistics.mean(memo),
        "mean_export_s_plain": statistics.mean(plain),
    }


def _child(ops: list[tuple[str, str]], samples: int) -> dict[str, Any] | None:
    command = [sys.executable, __file__, "--samples", str(samples), "--ops", json.dumps(ops)]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy())
    if done.returncode != 0:
        return None
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=0, help="first N OpInfos (0: all)")
    parser.add_argument("--samples", type=int, default=1, help="samples per OpInfo")
    parser.add_argument("--chunk", type=int, default=40, help="OpInfos per child process")
    parser.add_argument("--ops", help=argparse.SUPPRESS)  # a child's share, as JSON
    args = parser.parse_args()
    if args.ops:
        print(json.dumps(compare([tuple(op) for op in json.loads(args.ops)], args.samples)))
        return
    ops = [(n, v) for (n, v), op in sorted(op_db_index().items()) if _float32(op)]
    ops = ops[: args.limit] if args.limit else ops
    print(json.dumps(orchestrate(ops, args.samples, args.chunk)))


def _float32(op: Any) -> bool:
    import torch

    return torch.float32 in op.supported_dtypes("cpu")


if __name__ == "__main__":
    main()
