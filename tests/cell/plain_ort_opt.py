"""A plain script, no harness code in the path it measures: export one model of a zoo file
with `torch.onnx.export(dynamo=True)`, run it in ORT CPU sessions at ORT_DISABLE_ALL, at
ORT_ENABLE_ALL, and at ORT_ENABLE_ALL without one optimizer (`disabled_optimizers`), and
print as JSON each session's largest difference from eager.

    python plain_ort_opt.py ZOO_FILE MODEL OPTIMIZER
"""

import importlib.util
import json
import sys
import tempfile

import numpy as np
import onnxruntime as ort
import torch

# removed as the script exits (a folder of its own per run)
SCRATCH = tempfile.TemporaryDirectory()

LEVELS = {"none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL}


def max_abs(path: str, x: np.ndarray, eager: np.ndarray, level: str, disabled: list[str]) -> float:
    options = ort.SessionOptions()
    options.graph_optimization_level = LEVELS.get(level, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    session = ort.InferenceSession(
        path, options, providers=["CPUExecutionProvider"], disabled_optimizers=disabled
    )
    got = session.run(None, {session.get_inputs()[0].name: x})[0]
    return float(np.abs(got.astype(np.float64) - eager).max())


def main(zoo_file: str, name: str, optimizer: str) -> None:
    found = importlib.util.spec_from_file_location("zoo", zoo_file)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    (spec,) = [s for s in module.SPECS if s.name == name]
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    (x,) = spec.example_inputs()
    with torch.no_grad():
        eager = model(x).numpy().astype(np.float64)
    path = SCRATCH.name + "/m.onnx"
    torch.onnx.export(model, (x,), path, dynamo=True, opset_version=18)
    print(
        json.dumps(
            {
                "none": max_abs(path, x.numpy(), eager, "none", []),
                "all": max_abs(path, x.numpy(), eager, "all", []),
                "without": max_abs(path, x.numpy(), eager, "all", [optimizer]),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
