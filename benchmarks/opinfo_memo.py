"""The dynamo registry memo over the OpInfo database: each OpInfo's first float32 sample
exported twice in this process, with the memo and without, in alternating order; the two
exports' files must be byte for byte the same. Prints one JSON line: how many exports were
compared, how many were identical, which differed, and the median export time each way.

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
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.cell import exporters
from harness.cell.exporters import registry_memo
from harness.cell.exporters.request import ExportRequest
from harness.cell.shapes import Inputs
from harness.cell.warmup import warm_up_exporter
from harness.coverage.opinfo_samples import op_db_index, sample_set


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=0, help="first N OpInfos (0: all)")
    parser.add_argument("--samples", type=int, default=1, help="samples per OpInfo")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    warm_up_exporter("dynamo", 18)
    ops = [(n, v) for (n, v), op in sorted(op_db_index().items()) if _float32(op)]
    ops = ops[: args.limit] if args.limit else ops
    times: dict[bool, list[float]] = {True: [], False: []}
    compared, identical, differ = 0, 0, []
    root = Path(tempfile.mkdtemp(prefix="memo-"))
    for k, (name, variant) in enumerate(ops):
        try:
            samples = sample_set(name, variant, "float32", max_samples=args.samples).samples
        except Exception:
            continue
        for s in samples:
            order = (True, False) if (k + s.index) % 2 == 0 else (False, True)
            got = {}
            for memo in order:
                got[memo], seconds = export(s, memo, root / f"{k}-{s.index}-{memo}")
                times[memo].append(seconds)
            compared += 1
            if got[True] == got[False]:
                identical += 1
            else:
                differ.append(f"{name}.{variant}[{s.index}]")
        shutil.rmtree(root, ignore_errors=True)
    print(
        json.dumps(
            {
                "exports_compared": compared,
                "identical": identical,
                "differ": differ,
                "median_export_s_memo": statistics.median(times[True]),
                "median_export_s_plain": statistics.median(times[False]),
                "mean_export_s_memo": statistics.mean(times[True]),
                "mean_export_s_plain": statistics.mean(times[False]),
                "memo": registry_memo.stats(),
            }
        )
    )


def _float32(op: Any) -> bool:
    import torch

    return torch.float32 in op.supported_dtypes("cpu")


if __name__ == "__main__":
    main()
