"""The first node where an exported ONNX graph stops agreeing with the program it came from.

For a `numerics_mismatch` cell whose exporter maps ONNX values to its source graph (the
dynamo exporter names each ONNX value after the FX node that computed it, and writes the
node's ATen op and stack trace into its metadata): run the ONNX model once in ONNX
Runtime with every intermediate value added as a graph output, run the exported program
with an FX interpreter, and walk the ONNX nodes in graph order. The first node with an
output outside the cell's tolerance is where the export went wrong; later nodes only
inherit the error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from harness.cell.numerics import check_output
from harness.cell.shapes import Inputs
from harness.store.details import Divergence

_FX_NAME = re.compile(r"^%(\w+)")
_TARGET = re.compile(r"target=torch\.ops\.([\w.]+)\]")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_TORCH_DIR = str(Path(torch.__file__).resolve().parent)


def first_divergence(
    onnx_path: Path,
    program: torch.export.ExportedProgram,
    inputs: Inputs,
    tolerance: tuple[float, float],
) -> Divergence:
    """Compare every intermediate value the ONNX graph and the ExportedProgram share."""
    model = onnx.load(str(onnx_path), load_external_data=False)
    expected = _program_values(program, inputs.leaves())
    # The exporter renames the graph outputs (output_0, ...); the program's signature lists
    # the FX values they come from, in the same order.
    fx_outputs = list(getattr(program.graph_signature, "user_outputs", ()))
    for value, fx_name in zip(model.graph.output, fx_outputs, strict=False):
        if fx_name in expected:
            expected.setdefault(value.name, expected[fx_name])
    shared = [v.name for v in (*model.graph.value_info, *model.graph.output) if v.name in expected]
    actual = _onnx_values(
        onnx_path, model, shared, dict(zip(inputs.names(), inputs.leaves(), strict=True))
    )
    compared = 0
    for node in model.graph.node:
        for name in (o for o in node.output if o in actual and o in expected):
            compared += 1
            check = check_output(name, actual[name], expected[name], None, *tolerance)
            if not check.ok:
                return _named(node, name, check.max_abs, compared)
    return Divergence(compared=compared, reason=_none_found(compared))


def _none_found(compared: int) -> str:
    if not compared:
        return "no intermediate value of the ONNX graph matches a value of the exported program"
    return f"all {compared} intermediate values agree: the difference is in the final outputs"


def _program_values(
    program: torch.export.ExportedProgram, flat_inputs: Sequence[torch.Tensor]
) -> dict[str, np.ndarray]:
    """Every call_function node's tensor output, by node name (the ONNX value names)."""
    values: dict[str, np.ndarray] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> object:
            result = super().run_node(n)
            if n.op == "call_function" and isinstance(result, torch.Tensor):
                values[n.name] = result.detach().cpu().numpy()
            return result

    with torch.no_grad():
        Recorder(program.module()).run(*flat_inputs)
    return values


def _onnx_values(
    path: Path, model: onnx.ModelProto, names: list[str], by_name: dict[str, torch.Tensor]
) -> dict[str, np.ndarray]:
    """One ORT run of the model with the shared intermediates as extra outputs."""
    infos = {v.name: v for v in model.graph.value_info}
    extended = onnx.load(str(path))  # with its weights, to run
    known = {o.name for o in extended.graph.output}
    extended.graph.output.extend(infos[n] for n in names if n not in known)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(extended.SerializeToString(), options, ["CPUExecutionProvider"])
    feeds = {i.name: by_name[i.name].detach().cpu().numpy() for i in session.get_inputs()}
    outputs = [o.name for o in session.get_outputs()]
    return dict(zip(outputs, session.run(outputs, feeds), strict=True))


def _named(node: onnx.NodeProto, output: str, max_abs: float | None, compared: int) -> Divergence:
    meta = {p.key: p.value for p in node.metadata_props}
    fx = meta.get("pkg.torch.onnx.fx_node", "")
    target, fx_name = _TARGET.search(fx), _FX_NAME.search(fx)
    return Divergence(
        node=node.name,
        fx_node=fx_name.group(1) if fx_name else None,
        op_type=node.op_type,
        aten_op=target.group(1) if target else None,
        source=source_location(meta.get("pkg.torch.onnx.stack_trace", "")),
        output=output,
        max_abs=max_abs,
        compared=compared,
    )


def source_location(stack_trace: str) -> str | None:
    """The innermost frame outside torch's own code: the model line that called the op,
    as 'path:line in function'."""
    frames = list(_frames(stack_trace))
    outside = [f for f in frames if not f[0].startswith(_TORCH_DIR)]
    chosen = (outside or frames)[-1:] if frames else []
    return f"{chosen[0][0]}:{chosen[0][1]} in {chosen[0][2]}" if chosen else None


def _frames(stack_trace: str) -> Iterator[tuple[str, str, str]]:
    for match in _FRAME.finditer(stack_trace):
        yield match.group(1), match.group(2), match.group(3)
