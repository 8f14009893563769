"""The TorchScript-based exporter: `torch.onnx.export(..., dynamo=False)` on the module
(it traces inside the call), or on `torch.jit.script(module)` (`scripted`)."""

from __future__ import annotations

import time
from collections import Counter

import torch

from harness.cell.reference import Reference
from harness.cell.shapes import Inputs, dynamic_axes
from harness.cell.stages import StageFailure
from harness.exporters.phases import Hook, observe
from harness.exporters.request import Exported, ExportRequest, FailureFacts, quiet
from harness.store.details import Divergence, MismatchStage

# Tracing happens inside the TorchScript exporter's call: timed as the capture phase.
TRACE_HOOK = Hook(
    "capture", "torch.onnx._internal.torchscript_exporter.utils", "_trace_and_get_graph_from_model"
)


def _export_call(module: torch.nn.Module, r: ExportRequest) -> tuple[float, float | None]:
    """The exporter call's wall time, and the tracing inside it (None: not observable)."""
    axes = dynamic_axes(r.inputs, r.dynamic_shapes) if r.dynamic_shapes is not None else None
    with observe([TRACE_HOOK], ["capture"]) as clock:
        start = time.perf_counter()
        try:
            torch.onnx.export(
                module,
                r.inputs.args,
                str(r.path),
                kwargs=r.inputs.kwargs or None,
                input_names=list(r.inputs.names()),
                output_names=list(r.output_names) or None,
                opset_version=r.opset,
                dynamic_axes=axes,
                dynamo=False,
            )
        except Exception as exc:
            raise StageFailure(clock.failed_in("translate"), exc) from exc
        seconds = time.perf_counter() - start
    return seconds, clock.timings()["capture"]


def legacy_args(inputs: Inputs) -> tuple[object, ...]:
    # The TorchScript exporter takes keyword inputs as a trailing dict of the args tuple.
    if inputs.kwargs:
        return (*inputs.args, dict(inputs.kwargs))
    return inputs.args


def _graph_aten_ops(module: object) -> dict[str, int] | None:
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


class Adapter:
    """The exporter adapter (harness.exporters.ExporterAdapter); `scripted`: the
    module goes through torch.jit.script first."""

    def __init__(self, *, scripted: bool) -> None:
        self.scripted = scripted

    def refuses(self, model: torch.nn.Module) -> str | None:
        return None

    def sample(self) -> tuple[torch.nn.Module, Inputs] | None:
        return None

    def unavailable(self) -> str | None:
        return None

    def export(self, request: ExportRequest) -> Exported:
        """The user's calls: `torch.onnx.export(model, args, path, kwargs=..., dynamo=False,
        ...)`, after `torch.jit.script(model)` when scripted. Capture is the tracing inside the
        call (or torch.jit.script), translate the rest of the call. A torch.onnx.ExportableModule
        goes to the dynamo exporter even with dynamo=False (torch 2.13); so does this cell, as
        a direct call would."""
        r = request
        script_s = 0.0
        module: torch.nn.Module = r.model  # or its torch.jit.ScriptModule
        with quiet():
            if self.scripted:
                start = time.perf_counter()
                try:
                    module = torch.jit.script(r.model)
                except Exception as exc:
                    raise StageFailure("capture", exc) from exc
                script_s = time.perf_counter() - start
            call_s, traced_s = _export_call(module, r)
        if traced_s is None and not self.scripted:  # this torch offers no trace hook to observe
            phases: dict[str, float | None] = {"capture": None, "translate": None}
        else:
            traced = traced_s or 0.0
            phases = {"capture": script_s + traced, "translate": call_s - traced}
        return Exported(r.path, phases, seconds=script_s + call_s)

    def aten_ops(self, request: ExportRequest, exported: Exported) -> dict[str, int] | None:
        """ATen ops of the TorchScript graph the exporter starts from (traced or scripted).
        Taken outside the measured export, so it costs neither export time nor memory."""
        try:
            with quiet():
                if self.scripted:
                    module = torch.jit.script(request.model)
                else:
                    module = torch.jit.trace(  # type: ignore[no-untyped-call]  # torch's own
                        request.model, legacy_args(request.inputs), check_trace=False, strict=False
                    )
        except Exception:
            return None
        return _graph_aten_ops(module)

    def first_divergence(
        self, request: ExportRequest, exported: Exported, tolerance: tuple[float, float]
    ) -> Divergence:
        return Divergence(
            reason="the TorchScript exporter writes no mapping from ONNX values to the ops of"
            " a graph that could be run alongside (node names are module scopes)"
        )

    def mismatch_stage(
        self,
        request: ExportRequest,
        exported: Exported,
        reference: Reference,
        tolerance: tuple[float, float],
    ) -> MismatchStage:
        name = "torchscript-script" if self.scripted else "torchscript"
        return MismatchStage(reason=f"{name}: no stage-by-stage comparison")

    def on_failure(self, request: ExportRequest, error: BaseException) -> FailureFacts:
        return FailureFacts(
            self.aten_ops(request, Exported(request.path, {})), unconvertible_ops(request)
        )
