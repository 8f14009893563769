"""One decode cell exported the way a user does it, in a fresh Python process: the decode
zoo's step built under the seed (its cache classes registered by transformers' own helper,
as the entry's build does), one direct `torch.onnx.export(...)` call with the inputs, the
dynamic dimensions written out with `Dim.DYNAMIC`, optimum's input and output names, then
onnx.checker, an ONNX Runtime session, and the logits and present cache against eager at
the example shape, at a prefill and at a decode step (eager runs on a copy of the cache:
a step grows the cache it is given). The decode differential check
(benchmarks/test_decode_differential.py) compares its verdict and graph with the
harness's cell.

    python benchmarks/plain_decode.py --model hf.llama.decode --exporter dynamo --opset 18

Prints one JSON object: verdict (ok, export, check, ort_session, ort_run, numerics,
dynamic), the error, and the graph (op_type counts of the top-level graph, initializer
count, input and output names).
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort
import torch
import torch.utils._pytree as pytree
from torch.export import Dim

# Only to build the very same model and inputs and to judge outputs the same way; the
# export itself below is the direct call.
from harness.cell.numerics import compare_outputs
from harness.zoo.discovery import BUILTIN_ZOO, load_source

SOURCE = BUILTIN_ZOO / "transformers" / "decoders.py"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", required=True, choices=["dynamo", "torchscript"])
    p.add_argument("--opset", type=int, default=18)
    a = p.parse_args()
    spec = next(s for s in load_source(str(SOURCE)) if s.name == a.model)
    torch.manual_seed(0)
    step = spec.build().eval()
    torch.manual_seed(0)
    args = tuple(spec.example_inputs())
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(_verdict(step, args, spec, Path(tmp) / "model.onnx", a)))


def _tensors(args: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]


def _eager(step: Any, args: tuple[Any, ...]) -> list[Any]:
    with torch.no_grad():
        return [t.numpy() for t in step(*copy.deepcopy(args))]


def _eager64(step: Any, args: tuple[Any, ...]) -> list[Any] | None:
    """Eager in float64 (eager's own noise floor, as the harness judges with), if it runs."""
    try:
        model64 = copy.deepcopy(step).double()
        args64 = pytree.tree_map_only(
            torch.Tensor, lambda t: t.double() if t.is_floating_point() else t, copy.deepcopy(args)
        )
        with torch.no_grad():
            return [t.numpy() for t in model64(*args64)]
    except Exception:
        return None


def _judge(got: list[Any], step: Any, args: tuple[Any, ...], spec: Any) -> bool:
    checks = compare_outputs(got, _eager(step, args), _eager64(step, args), [], spec.tolerance)
    return all(c.ok for c in checks)


def _user_dynamic_shapes(spec: Any) -> Any:
    """The entry's dimensions, written out as a user would: Dim.DYNAMIC on each."""

    def dims(axes: Any) -> Any:
        if isinstance(axes, list):
            return [dims(a) for a in axes]
        return None if axes is None else dict.fromkeys(axes, Dim.DYNAMIC)

    return tuple(dims(axes) for axes in spec.dynamic_shapes)


def _export(step: Any, args: tuple[Any, ...], spec: Any, path: Path, a: Any) -> None:
    if a.exporter == "dynamo":
        dynamic: dict[str, Any] = {"dynamo": True, "dynamic_shapes": _user_dynamic_shapes(spec)}
    else:
        axes = {
            name: {int(k): v for k, v in dims.items()}
            for name, dims in zip(spec.input_names, _flat_dims(spec), strict=True)
            if dims
        }
        dynamic = {"dynamo": False, "dynamic_axes": axes}
    torch.onnx.export(
        step,
        args,
        str(path),
        opset_version=a.opset,
        input_names=list(spec.input_names),
        output_names=list(spec.output_names),
        **dynamic,
    )


def _flat_dims(spec: Any) -> list[Any]:
    flat: list[Any] = []
    for axes in spec.dynamic_shapes:
        if isinstance(axes, list):
            flat += axes
        elif axes is not None:
            flat.append(axes)
    return flat


def _verdict(step: Any, args: tuple[Any, ...], spec: Any, path: Path, a: Any) -> dict[str, Any]:
    try:
        _export(step, args, spec, path, a)
    except Exception as exc:
        return {"verdict": "export", "error": _first(exc)}
    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    facts = {
        "ops": dict(collections.Counter(n.op_type for n in graph.node)),
        "initializers": len(graph.initializer),
        "inputs": [i.name for i in graph.input],
        "outputs": [o.name for o in graph.output],
    }
    stage = "check"
    try:
        onnx.checker.check_model(str(path), full_check=True)
        stage = "ort_session"
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        stage = "ort_run"
        got = _run(session, spec, args)
    except Exception as exc:
        return {"verdict": stage, "error": _first(exc), **facts}
    if not _judge(got, step, args, spec):
        return {"verdict": "numerics", **facts}
    return {"verdict": _other_shapes(step, session, spec), **facts}


def _run(session: Any, spec: Any, args: tuple[Any, ...]) -> list[Any]:
    by_name = dict(zip(spec.input_names, _tensors(args), strict=True))
    return list(session.run(None, {i.name: by_name[i.name].numpy() for i in session.get_inputs()}))


def _other_shapes(step: Any, session: Any, spec: Any) -> str:
    """'ok' where the graph gives eager's numbers at the prefill and the decode step."""
    for sizes in spec.dynamic_sizes:
        torch.manual_seed(0)
        args = tuple(spec.inputs_at(step, sizes))
        try:
            got = _run(session, spec, args)
        except Exception:
            return "dynamic"
        if not _judge(got, step, args, spec):
            return "dynamic"
    return "ok"


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


if __name__ == "__main__":
    sys.exit(main())
