"""One CUDA cell measured the plain way, in a fresh process, for the GPU fidelity checks
(benchmarks/gpu_check.py): what a careful engineer would write by hand.

- ORT: the ONNX file the harness exported (--keep-onnx) in a session with the CUDA
  execution provider, inputs and outputs bound on the device (I/O binding), warmed up, then
  timed one synchronised call at a time.
- eager: the zoo entry built under the harness's seed, moved to the GPU, timed the same way.
- export memory: `torch.cuda.max_memory_allocated` above what was allocated before a plain
  `torch.onnx.export` of the model on the GPU (after one warm-up export, as the harness
  warms each exporter up once per process).

    python benchmarks/plain_cuda.py --onnx FILE --source FILE --model NAME \
        --exporter dynamo --opset 18
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import onnxruntime as ort
import torch

from harness.runtime.warmup import WarmUpModel
from harness.zoo.discovery import load_source


def timed_p50(call: Callable[[], Any], seconds: float) -> tuple[float, int]:
    """Median milliseconds of `call` (which synchronises) after a warm-up."""
    for _ in range(20):
        call()
    samples: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(samples) < 50:
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), len(samples)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def ort_call(
    path: str, leaves: list[torch.Tensor], device: str
) -> tuple[Callable[[], Any], list[str]]:
    provider = "CUDAExecutionProvider" if device == "cuda" else "CPUExecutionProvider"
    session = ort.InferenceSession(path, providers=[provider])
    binding = session.io_binding()
    names = {f"input_{i}": t.contiguous() for i, t in enumerate(leaves)}
    for i in session.get_inputs():
        t = names[i.name]
        dtype = torch.empty((), dtype=t.dtype).numpy().dtype.type
        binding.bind_input(i.name, device, 0, dtype, list(t.shape), t.data_ptr())
    for o in session.get_outputs():
        binding.bind_output(o.name, device, 0)

    def call() -> None:
        session.run_with_iobinding(binding)
        sync()

    return call, session.get_providers()


def export_peak_cuda_mb(model: torch.nn.Module, args: tuple[Any, ...], a: Any) -> float:
    dynamo = a.exporter == "dynamo"
    with tempfile.TemporaryDirectory() as tmp:
        warm = WarmUpModel().eval()
        torch.onnx.export(
            warm,
            WarmUpModel.example_inputs(),
            f"{tmp}/w.onnx",
            dynamo=dynamo,
            opset_version=a.opset,
        )
        if a.device != "cuda":  # a dry run of this script on a machine without a GPU
            torch.onnx.export(model, args, f"{tmp}/m.onnx", dynamo=dynamo, opset_version=a.opset)
            return 0.0
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        torch.onnx.export(model, args, f"{tmp}/m.onnx", dynamo=dynamo, opset_version=a.opset)
        torch.cuda.synchronize()
        return max(0, torch.cuda.max_memory_allocated() - start) / 1024**2


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--onnx", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", required=True, choices=["dynamo", "torchscript"])
    p.add_argument("--opset", type=int, required=True)
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--device", default="cuda", help="cpu: a dry run without a GPU")
    a = p.parse_args()
    spec = next(s for s in load_source(a.source) if s.name == a.model)
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    args = tuple(spec.example_inputs())
    model = model.to(a.device)
    args = tuple(t.to(a.device) if isinstance(t, torch.Tensor) else t for t in args)
    leaves = [t for t in args if isinstance(t, torch.Tensor)]
    call, providers = ort_call(a.onnx, leaves, a.device)
    ort_p50, ort_n = timed_p50(call, a.seconds)
    with torch.inference_mode():

        def eager() -> None:
            model(*args)
            sync()

        eager_p50, eager_n = timed_p50(eager, a.seconds)
    peak = export_peak_cuda_mb(model, args, a)
    print(
        json.dumps(
            {
                "ort_p50_ms": ort_p50,
                "ort_n": ort_n,
                "eager_p50_ms": eager_p50,
                "eager_n": eager_n,
                "export_peak_cuda_mb": peak,
                "providers": providers,
            }
        )
    )


if __name__ == "__main__":
    main()
