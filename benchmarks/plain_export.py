"""One cell exported the way a user does it, in a fresh Python process: the zoo model built
under the seed, one direct `torch.onnx.export(...)` call (after `torch.jit.script` for
torchscript-script), then onnx.checker, an ONNX Runtime session, one run, and the outputs
against eager. The differential check (benchmarks/differential.py) compares its verdict
and graph with the harness's cell.

`--dtype float16|bfloat16`: `model.to(dtype)` and the floating inputs cast, judged against
eager at the dtype by the dtype's tolerance with the float32 model as the truth (the
harness's gate, with the dtype's rounding); ORT's NOT_IMPLEMENTED at load is `runtime_missing`.
`--ort-opt`: the session a user opens for each level: `default` ORT_ENABLE_ALL, `none`
ORT_DISABLE_ALL, `all` ORT_ENABLE_ALL written out (optimized_model_filepath) and that file
loaded with ORT_DISABLE_ALL, `fusions` onnxruntime.transformers' optimize_model (opt_level
0) saved and loaded in a default session.

    python benchmarks/plain_export.py --source FILE --model NAME --exporter dynamo \
        --opset 18 [--dynamic] [--dtype float16] [--ort-opt fusions]

Prints one JSON object: verdict (ok, export, check, ort_session, ort_run, numerics,
runtime_missing), the error, and the graph (op_type counts of the top-level graph, as
exported, initializer count).
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from torch.utils._pytree import tree_map_only

# Only to build the very same model and to judge its outputs the same way; the export
# itself below is the direct call.
from harness.cell.numerics import compare_outputs, tolerance_at
from harness.cell.precision import rounding, to_numpy
from harness.cell.reference import reference64
from harness.cell.shapes import Inputs, dynamic_axes, flatten_outputs
from harness.store.axes import Dtype
from harness.zoo.discovery import load_source

LEVEL = {"default": "ORT_ENABLE_ALL", "none": "ORT_DISABLE_ALL", "all": "ORT_ENABLE_ALL"}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", required=True)
    p.add_argument("--opset", type=int, required=True)
    p.add_argument("--dynamic", action="store_true")
    p.add_argument("--dtype", choices=[d.value for d in Dtype], default="float32")
    p.add_argument("--ort-opt", choices=[*LEVEL, "fusions"], default="default")
    a = p.parse_args()
    spec = next(s for s in load_source(a.source) if s.name == a.model)
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    args = tuple(spec.example_inputs())
    kwargs = dict(spec.example_kwargs()) if spec.example_kwargs else {}
    params = tuple(inspect.signature(model.forward).parameters)
    if a.dtype == "float32":
        truth = reference64(model, Inputs(args, kwargs, params))
    else:  # the float32 model's outputs are the truth at a reduced dtype
        truth = _eager(model, args, kwargs)
        dtype = getattr(torch, a.dtype)
        model = model.to(dtype)
        args, kwargs = tree_map_only(
            torch.Tensor, lambda t: t.to(dtype) if t.is_floating_point() else t, (args, kwargs)
        )
    expected = _eager(model, args, kwargs)
    inputs = Inputs(args, kwargs, params)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        print(json.dumps(_verdict(model, inputs, path, a, spec, expected, truth)))


def _eager(model: Any, args: Any, kwargs: Any) -> list[np.ndarray]:
    with torch.no_grad():
        return [to_numpy(t) for t in flatten_outputs(model(*args, **kwargs))]


def _verdict(
    model: Any, inputs: Inputs, path: Path, a: Any, spec: Any, expected: list[Any], truth: Any
) -> dict[str, Any]:
    names = inputs.names()
    try:
        _export(model, inputs, path, a, spec.dynamic_shapes if a.dynamic else None, names)
    except Exception as exc:
        return {"verdict": "export", "error": _first(exc)}
    graph = onnx.load(str(path), load_external_data=False).graph
    facts = {
        "ops": dict(collections.Counter(n.op_type for n in graph.node)),
        "initializers": len(graph.initializer),
    }
    stage = "check"
    try:
        onnx.checker.check_model(str(path), full_check=True)
        stage = "ort_session"
        session = _session(path, a.ort_opt, spec)
        stage = "ort_run"
        by_name = dict(zip(names, inputs.leaves(), strict=True))
        got = _run(session, {i.name: by_name[i.name] for i in session.get_inputs()})
    except Exception as exc:
        if stage == "ort_session" and a.dtype != "float32" and "NOT_IMPLEMENTED" in str(exc):
            stage = "runtime_missing"
        return {"verdict": stage, "error": _first(exc), **facts}
    lost = None if a.dtype == "float32" else rounding(Dtype(a.dtype))
    checks = compare_outputs(
        got, expected, truth, [], tolerance_at(Dtype(a.dtype), spec.tolerance), rounding=lost
    )
    return {"verdict": "ok" if all(c.ok for c in checks) else "numerics", **facts}


def _session(path: Path, level: str, spec: Any) -> ort.InferenceSession:
    """The session a user opens for the ORT optimisation `level`."""
    if level == "fusions":
        from onnxruntime.transformers.optimizer import optimize_model

        fused = path.with_name("fused.onnx")
        model_type = str(spec.metadata.get("ort_model_type", "bert"))
        optimize_model(str(path), model_type, opt_level=0).save_model_to_file(str(fused))
        path, level = fused, "default"
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, LEVEL[level])
    if level == "all":
        written = path.with_name("optimized.onnx")
        options.optimized_model_filepath = str(written)
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        path, options = written, ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _run(session: ort.InferenceSession, feeds: dict[str, torch.Tensor]) -> list[np.ndarray]:
    """One run; bfloat16 feeds go in as OrtValues of ONNX's type (numpy has no bfloat16)."""
    if not any(t.dtype == torch.bfloat16 for t in feeds.values()):
        return list(session.run(None, {n: t.numpy() for n, t in feeds.items()}))
    values = {
        n: ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
            t.view(torch.uint16).numpy(), onnx.TensorProto.BFLOAT16
        )
        if t.dtype == torch.bfloat16
        else ort.OrtValue.ortvalue_from_numpy(t.numpy())
        for n, t in feeds.items()
    }
    got = session.run_with_ort_values(None, values)
    return [to_numpy(torch.from_dlpack(v._ortvalue.to_dlpack())) for v in got]


def _export(model: Any, inputs: Inputs, path: Path, a: Any, dynamic: Any, names: list[str]) -> None:
    if a.exporter == "dynamo":
        torch.onnx.export(
            model,
            inputs.args,
            str(path),
            kwargs=inputs.kwargs or None,
            dynamo=True,
            opset_version=a.opset,
            input_names=names,
            dynamic_shapes=dynamic,
        )
        return
    if a.exporter == "torchscript-script":
        model = torch.jit.script(model)
    torch.onnx.export(
        model,
        inputs.args,
        str(path),
        kwargs=inputs.kwargs or None,
        dynamo=False,
        opset_version=a.opset,
        input_names=names,
        dynamic_axes=dynamic_axes(inputs, dynamic) if dynamic is not None else None,
    )


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


if __name__ == "__main__":
    sys.exit(main())
