"""The exporters, one function each, all returning an `Exported` or raising `StageFailure`
with the phase that failed. Only this module calls torch.onnx.export."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.cell.shapes import Inputs, dynamic_axes, dynamo_shapes
from harness.cell.stages import StageFailure, stage


@dataclass
class Exported:
    path: Path
    phases: dict[str, float]
    aten_ops: dict[str, int] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ExportRequest:
    model: torch.nn.Module
    inputs: Inputs
    opset: int
    path: Path
    dynamic_shapes: Any = None  # None for static cells
    output_names: tuple[str, ...] = ()
    artifacts: Path | None = None  # where a failing export leaves the exporter's report


class Unavailable(Exception):
    """The exporter does not exist in the installed torch: the cell is skipped."""


def export(exporter: str, request: ExportRequest) -> Exported:
    try:
        fn = _EXPORTERS[exporter]
    except KeyError:
        raise ValueError(f"unknown exporter {exporter!r}") from None
    with _quiet():
        return fn(request)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """The exporters print progress and deprecation chatter; keep worker logs readable."""
    loggers = [
        logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


# -- torch.export-based exporter (dynamo=True) ---------------------------------------------


def export_dynamo(request: ExportRequest) -> Exported:
    """Capture (the exporter's own strategies), translate, optimize and save, each timed as
    its own phase; together they are what one torch.onnx.export(dynamo=True) call does."""
    phases: dict[str, float] = {}
    r = request
    ds = dynamo_shapes(r.dynamic_shapes) if r.dynamic_shapes is not None else None
    with stage("capture") as t:
        program = _capture(r, ds)
    phases["capture"] = t.seconds
    try:
        onnx_program = _translate(request, program, phases)
    except StageFailure as failure:
        failure.details["aten_ops"] = _count_aten_ops(program)
        failure.details["unsupported_ops"] = dynamo_unsupported_ops(failure.error)
        raise
    aten_ops = _count_aten_ops(onnx_program.exported_program)
    with stage("optimize") as t:
        onnx_program.optimize()
    phases["optimize"] = t.seconds
    with stage("save") as t:
        # As torch.onnx.export(dynamo=True) saves by default: weights streamed into
        # model.onnx.data. Embedding them builds the whole proto in memory (measured here:
        # a 128 MiB MLP peaked at 401 MiB that way, at 2 MiB the default way).
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


_OP_OVERLOAD = re.compile(r"OpOverload\(op='([\w.]+)', overload='(\w+)'\)")


def dynamo_unsupported_ops(error: BaseException) -> list[str] | None:
    """ATen overloads the dynamo exporter found no ONNX translation for, from its
    dispatch errors (e.g. 'aten.cummax.default')."""
    found: set[str] = set()
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if "No ONNX function found" in str(current) or "DispatchError" in type(current).__name__:
            found.update(f"{op}.{overload}" for op, overload in _OP_OVERLOAD.findall(str(current)))
        current = current.__cause__ or current.__context__
    return sorted(found) or None


def dynamo_report(request: ExportRequest) -> None:
    """Re-run a failed dynamo export with `report=True` so its markdown report lands in
    the artifacts folder (the exporter writes it only when asked)."""
    if request.artifacts is None:
        return
    request.artifacts.mkdir(parents=True, exist_ok=True)
    with _quiet(), contextlib.suppress(Exception):
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


# -- TorchScript-based exporter (dynamo=False) ---------------------------------------------


def export_torchscript(request: ExportRequest) -> Exported:
    return _export_legacy(request, scripted=False)


def export_torchscript_script(request: ExportRequest) -> Exported:
    return _export_legacy(request, scripted=True)


def _export_legacy(request: ExportRequest, *, scripted: bool) -> Exported:
    """The TorchScript exporter on the module (it traces inside the call: one phase), or
    torch.jit.script first and the exporter on the scripted module (two phases)."""
    r = request
    phases: dict[str, float] = {}
    module: Any = r.model
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
            _legacy_args(r.inputs),
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


def torchscript_aten_ops(request: ExportRequest, *, scripted: bool) -> dict[str, int] | None:
    """ATen ops of the TorchScript graph the exporter starts from (traced or scripted).
    Taken outside the measured export, so it costs neither export time nor memory."""
    try:
        with _quiet():
            if scripted:
                module = torch.jit.script(request.model)
            else:
                module = torch.jit.trace(
                    request.model, _legacy_args(request.inputs), check_trace=False, strict=False
                )
    except Exception:
        return None
    return _torchscript_aten_ops(module)


def _legacy_args(inputs: Inputs) -> tuple[Any, ...]:
    # The TorchScript exporter takes keyword inputs as a trailing dict of the args tuple.
    if inputs.kwargs:
        return (*inputs.args, dict(inputs.kwargs))
    return inputs.args


def _torchscript_aten_ops(module: Any) -> dict[str, int] | None:
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
        with _quiet():
            _, ops = torch.onnx.utils.unconvertible_ops(
                request.model, _legacy_args(request.inputs), opset_version=request.opset
            )
    except Exception:
        return None
    return sorted({op.replace("::", ".") for op in ops})


# -- the TorchDynamo-based exporter of torch 2.1-2.5 -------------------------------------


def export_dynamo_legacy(request: ExportRequest) -> Exported:
    legacy = getattr(torch.onnx, "dynamo_export", None)
    if legacy is None:
        raise Unavailable(f"torch {torch.__version__} has no torch.onnx.dynamo_export")
    r = request
    with stage("translate") as t:
        options = torch.onnx.ExportOptions(dynamic_shapes=r.dynamic_shapes is not None)  # type: ignore[attr-defined]
        program = legacy(r.model, *r.inputs.args, export_options=options, **r.inputs.kwargs)
    with stage("save") as s:
        program.save(str(r.path))
    return Exported(r.path, {"translate": t.seconds, "save": s.seconds})


def available(exporter: str) -> str | None:
    """None when the exporter can run here, else the reason its cells are skipped."""
    if exporter == "dynamo-legacy" and not hasattr(torch.onnx, "dynamo_export"):
        return f"torch {torch.__version__} has no torch.onnx.dynamo_export (removed in torch 2.9)"
    return None


_EXPORTERS: dict[str, Callable[[ExportRequest], Exported]] = {
    "dynamo": export_dynamo,
    "torchscript": export_torchscript,
    "torchscript-script": export_torchscript_script,
    "dynamo-legacy": export_dynamo_legacy,
}
