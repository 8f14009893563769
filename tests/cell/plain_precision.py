"""A plain script, no harness code in the path it measures: export one model of a zoo file
at a dtype with `torch.onnx.export`, run it in an ONNX Runtime CPU session, and print as
JSON the largest differences a user would compute (ORT vs eager at the dtype, each vs the
float32 model), or ORT's load error.

    python plain_precision.py ZOO_FILE MODEL dynamo|torchscript float16|bfloat16
"""

import importlib.util
import json
import sys
import tempfile

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import torch

# removed as the script exits (a folder of its own per run)
SCRATCH = tempfile.TemporaryDirectory()


def main(zoo_file: str, name: str, exporter: str, dtype_name: str) -> None:
    found = importlib.util.spec_from_file_location("zoo", zoo_file)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    (spec,) = [s for s in module.SPECS if s.name == name]
    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    (x,) = spec.example_inputs()
    with torch.no_grad():
        want32 = model(x).numpy()
        low = model.to(dtype)
        x_low = x.to(dtype)
        eager = low(x_low).float().numpy()
    path = SCRATCH.name + "/m.onnx"
    torch.onnx.export(low, (x_low,), path, dynamo=exporter == "dynamo", opset_version=18)
    try:
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as exc:
        print(json.dumps({"ort_error": str(exc)}))
        return
    name_in = session.get_inputs()[0].name
    if dtype_name == "bfloat16":
        raw = x_low.view(torch.uint16).numpy()
        feed = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, onnx.TensorProto.BFLOAT16)
        (out,) = session.run_with_ort_values(None, {name_in: feed})
        got = torch.from_dlpack(out._ortvalue.to_dlpack()).float().numpy()
    else:
        got = session.run(None, {name_in: x_low.numpy()})[0].astype(np.float32)
    assert ml_dtypes  # numpy's bfloat16, as the harness reads it
    print(
        json.dumps(
            {
                "ort_vs_eager": float(np.abs(got.astype(np.float64) - eager).max()),
                "eager_vs_float32": float(np.abs(eager - want32).max()),
                "ort_vs_float32": float(np.abs(got - want32).max()),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
