"""A minimal ORT timing loop in a fresh process, for the latency-fidelity benchmark: the
ONNX file the harness exported (--keep-onnx), the same inputs (the zoo entry's inputs
under the harness's seed), the same threads.

    python benchmarks/plain_latency.py --onnx FILE --source FILE --model NAME [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import onnxruntime as ort
import torch

from harness.zoo.discovery import load_source


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--onnx", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=1.0)
    a = p.parse_args()
    spec = next(s for s in load_source(a.source) if s.name == a.model)
    torch.manual_seed(0)
    spec.build()  # the harness draws the inputs after building under the same seed
    torch.manual_seed(0)
    leaves = [t for t in _flatten(tuple(spec.example_inputs()))]
    options = ort.SessionOptions()
    options.intra_op_num_threads = a.threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(a.onnx, options, providers=["CPUExecutionProvider"])
    names = {f"input_{i}": t.numpy() for i, t in enumerate(leaves)}
    feeds = {i.name: names[i.name] for i in session.get_inputs()}
    for _ in range(10):
        session.run(None, feeds)
    samples = []
    end = time.perf_counter() + a.seconds
    while time.perf_counter() < end or len(samples) < 20:
        t0 = time.perf_counter()
        session.run(None, feeds)
        samples.append((time.perf_counter() - t0) * 1000)
    print(json.dumps({"p50_ms": statistics.median(samples), "n": len(samples)}))


def _flatten(value):  # type: ignore[no-untyped-def]
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _flatten(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _flatten(v)


if __name__ == "__main__":
    main()
