"""The export peak memory of one cell in a fresh process, read from the kernel's peak
(VmHWM): build the model, export the harness's warm-up model first (the harness also
warms each exporter up once per process with it, so that one-time initialisation is not
charged to a model), reset the peak, export, and report VmHWM minus the RSS before the export
and the library pages the export mapped meanwhile (RssFile), as the harness counts it.

    python benchmarks/plain_memory.py --source FILE --model NAME --exporter dynamo --opset 18
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from harness.runtime.warmup import WarmUpModel
from harness.zoo.discovery import load_source


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(field)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", required=True, choices=["dynamo", "torchscript"])
    p.add_argument("--opset", type=int, required=True)
    a = p.parse_args()
    spec = next(s for s in load_source(a.source) if s.name == a.model)
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    args = tuple(spec.example_inputs())
    dynamo = a.exporter == "dynamo"
    with tempfile.TemporaryDirectory() as tmp:
        torch.onnx.export(
            WarmUpModel().eval(),
            WarmUpModel.example_inputs(),
            f"{tmp}/warm.onnx",
            dynamo=dynamo,
            opset_version=a.opset,
        )
        Path("/proc/self/clear_refs").write_text("5")
        baseline, files = _kib("VmRSS"), _kib("RssFile")
        torch.onnx.export(model, args, f"{tmp}/model.onnx", dynamo=dynamo, opset_version=a.opset)
        peak, mapped = _kib("VmHWM"), max(0, _kib("RssFile") - files)
    print(json.dumps({"peak_mb": (peak - baseline - mapped) / 1024}))


if __name__ == "__main__":
    main()
