"""One real-size cell the plain way, in a fresh process: what an engineer measuring by hand
would write. Build the zoo entry (the very same model and inputs), give the allocator's
free pages back and reset the kernel's peak-RSS mark, export with `torch.onnx.export` and
save (external data past 2 GB, as the exporters do by themselves), read the peak (less the
library pages the export mapped, as the harness counts it), then time an ONNX Runtime
session on the node's cores for as many calls as the harness took.

    python benchmarks/plain_real_size.py --model real.bert_base --exporter dynamo \
        --ort-iters 40 --threads 2

Prints one JSON object: export_s, export_peak_rss_mb (VmHWM over the RSS before the
export), ort_p50_ms, onnx_bytes. With `--warm-up`, a small model is exported first (an
engineer timing the export itself, not the process's first export: the harness's export
figures are taken after its warm-up, the one-time start reported apart as `cold_start`),
and its seconds printed as warm_up_s. The warm-up comes before the model is built, in the
order a cell's process sees them (its zygote warmed up before the cell built its model):
the other order left the allocator otherwise, and the export's peak read 2.8 MB lower for
BERT-base and 2.3-3.8 MB lower for Whisper-base, as much as the gap it was taken for.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path

import onnxruntime as ort
import torch

from harness.zoo.discovery import discover

CLEAR_REFS = Path("/proc/self/clear_refs")


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def _export(
    model: torch.nn.Module, args: tuple[torch.Tensor, ...], path: Path, exporter: str
) -> None:
    with torch.no_grad():
        torch.onnx.export(model, args, str(path), dynamo=exporter == "dynamo", opset_version=18)


def _release_free_memory() -> None:
    """What the building and the warm-up freed goes back to the kernel before the baseline:
    else the export reuses those resident pages without raising RSS, and its peak reads
    what the process happened to free before it, not what the export needs (the harness
    does the same before its baseline: harness.cell.timing.PeakRss)."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def _warm_up(exporter: str, tmp: Path) -> None:
    """Export and load a small model once: the exporter's one-time start (imports, registry)
    paid before the timed export."""
    small = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    path = tmp / "warm-up.onnx"
    _export(small.eval(), (torch.rand(2, 8),), path, exporter)
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _p50(session: ort.InferenceSession, feeds: dict[str, object], iters: int) -> float:
    session.run(None, feeds)  # one warm-up call, as the harness's warm-up starts with
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        session.run(None, feeds)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def built(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The zoo entry's model in eval mode and its example inputs, each made from seed 0."""
    spec = discover().get(name)
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    return model, tuple(spec.example_inputs())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", required=True, choices=["dynamo", "torchscript"])
    p.add_argument("--ort-iters", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warm-up", action="store_true", help="export a small model first")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    out: dict[str, object] = {"model": a.model, "exporter": a.exporter}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        if a.warm_up:  # before the model is built, as a zygote warms up before its cells
            (Path(tmp) / "warm-up").mkdir()
            start = time.perf_counter()
            _warm_up(a.exporter, Path(tmp) / "warm-up")
            out["warm_up_s"] = time.perf_counter() - start
        model, args = built(a.model)
        _release_free_memory()
        CLEAR_REFS.write_text("5")
        before, files = _kib("VmRSS"), _kib("RssFile")
        start = time.perf_counter()
        _export(model, args, path, a.exporter)
        out["export_s"] = time.perf_counter() - start
        # less the library pages first mapped meanwhile, as the harness counts (PeakRss)
        mapped = max(0, _kib("RssFile") - files)
        out["export_peak_rss_mb"] = (_kib("VmHWM") - before - mapped) / 1024
        out["onnx_bytes"] = sum(f.stat().st_size for f in path.parent.iterdir() if f.is_file())
        options = ort.SessionOptions()
        options.intra_op_num_threads = a.threads
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), args, strict=False)}
        out["ort_p50_ms"] = _p50(session, feeds, a.ort_iters)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
