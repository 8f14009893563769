"""The torch.export-based exporter: `torch.onnx.export(..., dynamo=True)`."""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from typing import Any

import torch

from harness.cell.exporters.request import Exported, ExportRequest, FailureFacts, quiet
from harness.cell.shapes import dynamo_shapes
from harness.cell.stages import StageFailure, stage


def unavailable() -> str | None:
    return None


def export(request: ExportRequest) -> Exported:
    """Capture (the exporter's own strategies), translate, optimize and save, each timed as
    its own phase; together they are what one torch.onnx.export(dynamo=True) call does."""
    phases: dict[str, float] = {}
    r = request
    ds = dynamo_shapes(r.dynamic_shapes) if r.dynamic_shapes is not None else None
    with quiet():
        with stage("capture") as t:
            program = _capture(r, ds)
        phases["capture"] = t.seconds
        try:
            onnx_program = _translate(request, program, phases)
        except StageFailure as failure:
            failure.details["aten_ops"] = _count_aten_ops(program)
            raise
        aten_ops = _count_aten_ops(onnx_program.exported_program)
        with stage("optimize") as t:
            onnx_program.optimize()
        phases["optimize"] = t.seconds
        with stage("save") as t:
            # As torch.onnx.export(dynamo=True) saves by default: weights streamed into
            # model.onnx.data. Embedding them builds the whole proto in memory (measured
            # here: a 128 MiB MLP peaked at 401 MiB that way, at 2 MiB the default way).
            onnx_program.save(r.path, external_data=True)
        phases["save"] = t.seconds
    return Exported(r.path, phases, aten_ops)


def _capture(request: ExportRequest, dynamic_shapes: Any) -> Any:
    """torch.export the way the exporter does it: its capture strategies in its order
    (non-strict with its RNN and size-oblivious patches, then strict, then draft export),
    the first error raised when all fail. Calling torch.export.export directly instead
    gives different results (seen here: dynamic LSTM/GRU models fail without the patches)."""
    r = request
    strategies = _capture_strategies()
    if not strategies:  # the private API moved: plain non-strict torch.export
        return torch.export.export(
            r.model, r.inputs.args, r.inputs.kwargs, dynamic_shapes=dynamic_shapes, strict=False
        )
    first_error: Exception | None = None
    for strategy in strategies:
        result = strategy(verbose=False)(r.model, r.inputs.args, r.inputs.kwargs, dynamic_shapes)
        if result.success:
            return result.exported_program
        first_error = first_error or result.exception
    raise first_error or RuntimeError("no capture strategy succeeded")


def _capture_strategies() -> list[Any]:
    try:
        from torch.onnx._internal.exporter import _capture_strategies as capture
    except ImportError:
        return []
    return list(getattr(capture, "CAPTURE_STRATEGIES", []))


def _translate(request: ExportRequest, program: Any, phases: dict[str, float]) -> Any:
    r = request
    with stage("translate") as t:
        onnx_program = torch.onnx.export(
            program,
            r.inputs.args,
            kwargs=r.inputs.kwargs,
            dynamic_shapes=r.dynamic_shapes,
            input_names=list(r.inputs.names()),
            output_names=list(r.output_names) or None,
            opset_version=r.opset,
            optimize=False,
            dynamo=True,
        )
    phases["translate"] = t.seconds
    return onnx_program


def translated_program(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The ExportedProgram a real `torch.onnx.export(..., dynamo=True)` call translates to
    ONNX: after the exporter's decompositions, so its op names are a dynamo record's
    `aten_ops` (the op inventory reads it). Where translation fails (an op without an ONNX
    translation, which the inventory must still list), the exporter's own capture and
    decomposition steps give the program it would have translated: observed, never
    exported."""
    with quiet():
        try:
            onnx_program: Any = torch.onnx.export(
                model, args, kwargs=kwargs, dynamo=True, optimize=False
            )
            return onnx_program.exported_program
        except Exception:
            from torch.onnx._internal.exporter import _core, _registration

            program = torch.export.export(model, args, kwargs, strict=False)
            registry = _registration.ONNXRegistry.from_torchlib()
            return _core._prepare_exported_program_for_export(program, registry=registry)


def aten_ops(request: ExportRequest, exported: Exported) -> dict[str, int] | None:
    return exported.aten_ops


def on_failure(request: ExportRequest, error: BaseException) -> FailureFacts:
    """The ATen ops captured before translation failed, the ops it found no translation
    for, and the exporter's own markdown report in the artifacts folder."""
    details = error.details if isinstance(error, StageFailure) else {}
    cause = error.error if isinstance(error, StageFailure) else error
    _write_report(request)
    return FailureFacts(details.get("aten_ops"), unsupported_ops(cause))  # type: ignore[arg-type]


_OP_OVERLOAD = re.compile(r"OpOverload\(op='([\w.]+)', overload='(\w+)'\)")


def unsupported_ops(error: BaseException) -> list[str] | None:
    """ATen overloads the exporter found no ONNX translation for, from its dispatch errors
    (e.g. 'aten.cummax.default')."""
    found: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if "No ONNX function found" in str(current) or "DispatchError" in type(current).__name__:
            found.update(f"{op}.{overload}" for op, overload in _OP_OVERLOAD.findall(str(current)))
        current = current.__cause__ or current.__context__
    return sorted(found) or None


def _write_report(request: ExportRequest) -> None:
    """Re-run a failed export with `report=True` so its markdown report lands in the
    artifacts folder (the exporter writes it only when asked)."""
    if request.artifacts is None:
        return
    request.artifacts.mkdir(parents=True, exist_ok=True)
    with quiet(), contextlib.suppress(Exception):
        torch.onnx.export(
            request.model,
            request.inputs.args,
            kwargs=request.inputs.kwargs,
            dynamic_shapes=request.dynamic_shapes,
            opset_version=request.opset,
            dynamo=True,
            report=True,
            artifacts_dir=request.artifacts,
        )


def _count_aten_ops(program: Any) -> dict[str, int] | None:
    """ATen overloads in the (decomposed) exported program, e.g. 'aten.conv2d.default'."""
    if program is None:
        return None
    counts: Counter[str] = Counter()
    for node in program.graph.nodes:
        # OpOverloads only: operator.getitem and friends are graph plumbing, not ATen ops.
        if node.op == "call_function" and type(node.target).__name__ == "OpOverload":
            counts[str(node.target)] += 1
    return dict(sorted(counts.items()))
