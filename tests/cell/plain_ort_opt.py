"""A plain script, no harness code in the path it measures: export one model of a zoo file
at float16 with `torch.onnx.export(dynamo=True)`, fuse it with onnxruntime.transformers'
optimizer (all fusions, then again without one), run each in an ORT CPU session, and print
as JSON the share of elements beyond torch's float16 tolerance (1e-3, 1e-5) against eager
and not within ten times eager's own error against the float32 model (eager's noise floor).

    python plain_ort_opt.py ZOO_FILE MODEL FUSION_FLAG
"""

import importlib.util
import json
import sys
import tempfile

import numpy as np
import onnxruntime as ort
import torch
from onnxruntime.transformers.fusion_options import FusionOptions
from onnxruntime.transformers.optimizer import optimize_model


def beyond(path: str, x: np.ndarray, eager: np.ndarray, truth: np.ndarray) -> float:
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = session.run(None, {session.get_inputs()[0].name: x})[0].astype(np.float64)
    want, truth = eager.astype(np.float64), truth.astype(np.float64)
    off = np.abs(got - want) > 1e-5 + 1e-3 * np.abs(want)
    noisy = np.abs(got - truth) <= 10 * np.abs(want - truth) + 1e-5
    return float(np.mean(off & ~noisy))


def main(zoo_file: str, name: str, flag: str) -> None:
    found = importlib.util.spec_from_file_location("zoo", zoo_file)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    (spec,) = [s for s in module.SPECS if s.name == name]
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    (x,) = spec.example_inputs()
    with torch.no_grad():
        truth = model(x).numpy()
        model, x = model.half(), x.half()
        eager = model(x).numpy()
    folder = tempfile.mkdtemp()
    torch.onnx.export(model, (x,), f"{folder}/m.onnx", dynamo=True, opset_version=18)
    shares = {}
    for without in (None, flag):
        options = FusionOptions("bert")
        if without:
            setattr(options, without, False)
        fused = optimize_model(
            f"{folder}/m.onnx", "bert", optimization_options=options, opt_level=0
        )
        fused.save_model_to_file(f"{folder}/f.onnx")
        shares[without or "all"] = beyond(f"{folder}/f.onnx", x.numpy(), eager, truth)
    shares["unfused"] = beyond(f"{folder}/m.onnx", x.numpy(), eager, truth)
    print(json.dumps(shares))


if __name__ == "__main__":
    main(*sys.argv[1:])
