"""One cell exported the way a user does it, in a fresh Python process: the zoo model built
under the seed, one direct `torch.onnx.export(...)` call (after `torch.jit.script` for
torchscript-script), then onnx.checker, an ONNX Runtime session, one run, and the outputs
against eager. The differential check (benchmarks/differential.py) compares its verdict
and graph with the harness's cell.

    python benchmarks/plain_export.py --source FILE --model NAME --exporter dynamo \
        --opset 18 [--dynamic]

Prints one JSON object: verdict (ok, export, check, ort_session, ort_run, numerics), the
error, and the graph (op_type counts of the top-level graph, initializer count).
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

import onnx
import onnxruntime as ort
import torch

# Only to build the very same model and to judge its outputs the same way; the export
# itself below is the direct call.
from harness.cell.numerics import compare_outputs
from harness.cell.reference import reference64
from harness.cell.shapes import Inputs, dynamic_axes, flatten_outputs
from harness.zoo.discovery import load_source


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", required=True)
    p.add_argument("--opset", type=int, required=True)
    p.add_argument("--dynamic", action="store_true")
    a = p.parse_args()
    spec = next(s for s in load_source(a.source) if s.name == a.model)
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    args = tuple(spec.example_inputs())
    kwargs = dict(spec.example_kwargs()) if spec.example_kwargs else {}
    with torch.no_grad():
        expected = [t.numpy() for t in flatten_outputs(model(*args, **kwargs))]
    inputs = Inputs(args, kwargs, tuple(inspect.signature(model.forward).parameters))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        print(json.dumps(_verdict(model, inputs, path, a, spec, expected)))


def _verdict(model: Any, inputs: Inputs, path: Path, a: Any, spec: Any, expected: list) -> dict:  # type: ignore[type-arg]
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
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        stage = "ort_run"
        by_name = dict(zip(names, inputs.leaves(), strict=True))
        got = session.run(None, {i.name: by_name[i.name].numpy() for i in session.get_inputs()})
    except Exception as exc:
        return {"verdict": stage, "error": _first(exc), **facts}
    checks = compare_outputs(got, expected, reference64(model, inputs), [], spec.tolerance)
    return {"verdict": "ok" if all(c.ok for c in checks) else "numerics", **facts}


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
