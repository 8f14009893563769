"""The TorchScript-based exporter: `torch.onnx.export(..., dynamo=False)` on the module
(it traces inside the call), or on `torch.jit.script(module)` (`scripted`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from harness.cell.exporters.request import Exported, ExportRequest, FailureFacts, quiet
from harness.cell.shapes import Inputs, dynamic_axes
from harness.cell.stages import stage


def unavailable(*, scripted: bool) -> str | None:
    return None


def export(request: ExportRequest, *, scripted: bool) -> Exported:
    """One phase (translate) for tracing; capture (torch.jit.script) then translate when
    scripted."""
    r = request
    phases: dict[str, float] = {}
    module: Any = r.model
    with quiet():
        if scripted:
            with stage("capture") as t:
                module = torch.jit.script(r.model)
            phases["capture"] = t.seconds
        if _is_exportable_module(module):
            module = _TorchScriptOnly(module)
        axes = dynamic_axes(r.inputs, r.dynamic_shapes) if r.dynamic_shapes is not None else None
        with stage("translate") as t:
            torch.onnx.export(
                module,
                legacy_args(r.inputs),
                str(r.path),
                input_names=list(r.inputs.names()),
                output_names=list(r.output_names) or None,
                opset_version=r.opset,
                dynamic_axes=axes,
                dynamo=False,
            )
        phases["translate"] = t.seconds
    return Exported(r.path, phases)


def _is_exportable_module(model: Any) -> bool:
    return isinstance(model, getattr(torch.onnx, "ExportableModule", ()))


class _TorchScriptOnly(torch.nn.Module):
    """torch.onnx.export sends a torch.onnx.ExportableModule to the dynamo exporter even
    with dynamo=False (torch 2.13: its `node_linear` names showed up in `torchscript`
    cells); wrapped in a plain module, the TorchScript exporter traces it."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, *args: Any) -> Any:
        return self.model(*args)


def aten_ops(
    request: ExportRequest, exported: Exported, *, scripted: bool
) -> dict[str, int] | None:
    """ATen ops of the TorchScript graph the exporter starts from (traced or scripted).
    Taken outside the measured export, so it costs neither export time nor memory."""
    try:
        with quiet():
            if scripted:
                module = torch.jit.script(request.model)
            else:
                module = torch.jit.trace(
                    request.model, legacy_args(request.inputs), check_trace=False, strict=False
                )
    except Exception:
        return None
    return _graph_aten_ops(module)


def on_failure(request: ExportRequest, error: BaseException, *, scripted: bool) -> FailureFacts:
    return FailureFacts(
        aten_ops(request, Exported(request.path, {}), scripted=scripted),
        unconvertible_ops(request),
    )


def legacy_args(inputs: Inputs) -> tuple[Any, ...]:
    # The TorchScript exporter takes keyword inputs as a trailing dict of the args tuple.
    if inputs.kwargs:
        return (*inputs.args, dict(inputs.kwargs))
    return inputs.args


def _graph_aten_ops(module: Any) -> dict[str, int] | None:
    graph = getattr(module, "inlined_graph", None) or getattr(module, "graph", None)
    if graph is None:
        return None
    counts: Counter[str] = Counter()
    for node in graph.nodes():
        kind = node.kind()
        if kind.startswith("aten::"):
            counts["aten." + kind.split("::", 1)[1]] += 1
    return dict(sorted(counts.items()))


def unconvertible_ops(request: ExportRequest) -> list[str] | None:
    """The TorchScript exporter's list of ATen ops it cannot convert at this opset."""
    try:
        with quiet():
            _, ops = torch.onnx.utils.unconvertible_ops(
                request.model, legacy_args(request.inputs), opset_version=request.opset
            )
    except Exception:
        return None
    return sorted({op.replace("::", ".") for op in ops})
