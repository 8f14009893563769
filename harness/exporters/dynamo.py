"""The torch.export-based exporter: one real `torch.onnx.export(..., dynamo=True)` call."""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import TYPE_CHECKING, cast

import torch

from harness.cell.reference import Reference
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.exporters import dynamo_report
from harness.exporters.phases import Hook, PhaseClock, observe
from harness.exporters.registry_memo import memoised
from harness.exporters.request import Exported, ExportRequest, FailureFacts, quiet
from harness.store.details import Divergence, MismatchStage

if TYPE_CHECKING:
    from torch.onnx._internal.exporter._capture_strategies import Result
    from torch.onnx._internal.exporter._registration import ONNXRegistry

_EXPORTER = "torch.onnx._internal.exporter"
_PROGRAM = f"{_EXPORTER}._onnx_program:ONNXProgram"
HOOKS = (
    Hook(
        "capture",
        f"{_EXPORTER}._capture_strategies:CaptureStrategy",
        "__call__",
        keep_result=True,  # each strategy's Result, for the failure report
    ),
    # The ONNX function registry is rebuilt by every call (0.5-1.6 s here; memoised per
    # process and inputs by registry_memo, exactly as built): translation.
    Hook("translate", f"{_EXPORTER}._registration:ONNXRegistry", "from_torchlib", keep_result=True),
    Hook("translate", f"{_EXPORTER}._core", "_prepare_exported_program_for_export", keep_arg=True),
    Hook("translate", f"{_EXPORTER}._core", "_exported_program_to_onnx_program", keep_arg=True),
    Hook("translate", "onnxscript._framework_apis.torch_2_11", "convert_version"),
    Hook("optimize", _PROGRAM, "optimize"),
    Hook("save", _PROGRAM, "save"),
)
PHASES = ("capture", "translate", "optimize", "save")
NO_PROGRAM = "the exporter returned no program to compare with"


def _kept_program(clock: PhaseClock, attribute: str) -> torch.export.ExportedProgram | None:
    """The program a hook kept (its function's first argument), if it ran."""
    kept = clock.kept.get(attribute)
    return kept if isinstance(kept, torch.export.ExportedProgram) else None


def _last_program(clock: PhaseClock) -> torch.export.ExportedProgram | None:
    """The program the failed call got furthest with: decomposed, else captured."""
    return _kept_program(clock, "_exported_program_to_onnx_program") or _captured(clock)


def _observed(clock: PhaseClock, error: BaseException) -> dynamo_report.Observed:
    registries = clock.returned.get("from_torchlib") or [None]
    return dynamo_report.Observed(
        error=error,
        captures=cast("list[Result]", clock.returned.get("__call__", [])),
        captured=_captured(clock),
        decomposed=_kept_program(clock, "_exported_program_to_onnx_program"),
        registry=cast("ONNXRegistry | None", registries[-1]),
    )


def _captured(clock: PhaseClock) -> torch.export.ExportedProgram | None:
    """The program torch.export captured, before the exporter's decompositions."""
    return _kept_program(clock, "_prepare_exported_program_for_export")


def translated_program(
    model: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
) -> torch.export.ExportedProgram:
    """The ExportedProgram a real `torch.onnx.export(..., dynamo=True)` call translates to
    ONNX: after the exporter's decompositions, so its op names are a dynamo record's
    `aten_ops` (the op inventory reads it). Where translation fails (an op without an ONNX
    translation, which the inventory must still list), the exporter's own capture and
    decomposition steps give the program it would have translated: observed, never
    exported."""
    with quiet(), memoised():
        try:
            onnx_program = torch.onnx.export(
                model, args, kwargs=kwargs, dynamo=True, optimize=False
            )
            assert onnx_program is not None  # dynamo=True returns the ONNXProgram
            assert onnx_program.exported_program is not None  # made from a module
            return onnx_program.exported_program
        except Exception:
            from torch.onnx._internal.exporter import _core, _registration

            program = torch.export.export(model, args, kwargs, strict=False)
            registry = _registration.ONNXRegistry.from_torchlib()
            return _core._prepare_exported_program_for_export(program, registry=registry)


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


def _count_aten_ops(program: torch.export.ExportedProgram | None) -> dict[str, int] | None:
    """ATen overloads in the (decomposed) exported program, e.g. 'aten.conv2d.default'."""
    if program is None:
        return None
    counts: Counter[str] = Counter()
    for node in program.graph.nodes:
        # OpOverloads only: operator.getitem and friends are graph plumbing, not ATen ops.
        if node.op == "call_function" and type(node.target).__name__ == "OpOverload":
            counts[str(node.target)] += 1
    return dict(sorted(counts.items()))


class Adapter:
    """The exporter adapter (harness.exporters.ExporterAdapter)."""

    def refuses(self, model: torch.nn.Module) -> str | None:
        return None

    def sample(self) -> tuple[torch.nn.Module, Inputs] | None:
        return None

    def unavailable(self) -> str | None:
        return None

    def export(self, request: ExportRequest) -> Exported:
        """One `torch.onnx.export(model, args, path, kwargs=..., dynamo=True, ...)`, as a user
        calls it, with the exporter's defaults (optimize, weights as external data); the
        phases are observed around the call; the ONNX function registry it builds comes from
        this process's memo of identical builds, and torch's materialisation of the
        CompositeImplicitAutograd ops runs where their list changed (registry_memo). A failure
        is a StageFailure in the phase that was running."""
        r = request
        with (
            quiet(),
            memoised(wanted=r.registry_memo),
            observe(HOOKS, PHASES) as clock,
        ):
            start = time.perf_counter()
            try:
                onnx_program = torch.onnx.export(
                    r.model,
                    r.inputs.args,
                    str(r.path),
                    kwargs=r.inputs.kwargs or None,
                    dynamic_shapes=r.dynamic_shapes,
                    input_names=list(r.inputs.names()),
                    output_names=list(r.output_names) or None,
                    opset_version=r.opset,
                    dynamo=True,
                )
            except Exception as exc:
                # A capture strategy returns its error; the call raises after the last one
                # fails. Everything after capture is observed, so the last phase entered is
                # where the call stopped.
                failure = StageFailure(clock.failed_in(clock.last_entered or "capture"), exc)
                failure.details["aten_ops"] = _count_aten_ops(_last_program(clock))
                failure.details["program"] = _last_program(clock)  # what a minimal repro shrinks
                failure.details["captured"] = _captured(clock)
                failure.details["observed"] = _observed(clock, exc)
                raise failure from exc
            total = time.perf_counter() - start
        assert onnx_program is not None  # dynamo=True returns the ONNXProgram
        aten_ops = _count_aten_ops(onnx_program.exported_program)
        program = onnx_program.exported_program
        exported = Exported(r.path, clock.timings(), aten_ops, seconds=total, program=program)
        exported.captured = _captured(clock)
        return exported

    def aten_ops(self, request: ExportRequest, exported: Exported) -> dict[str, int] | None:
        return exported.aten_ops

    def first_divergence(
        self, request: ExportRequest, exported: Exported, tolerance: tuple[float, float]
    ) -> Divergence:
        """ONNX values are named after the FX nodes of the translated program: compare them."""
        from harness.cell.divergence import first_divergence as locate

        if exported.program is None:
            return Divergence(reason=NO_PROGRAM)
        try:
            return locate(exported.path, exported.program, request.inputs, tolerance)
        except Exception as exc:  # a diagnosis that fails must not change the cell's verdict
            return Divergence(reason=f"comparison failed: {type(exc).__name__}: {exc}"[:300])

    def mismatch_stage(
        self,
        request: ExportRequest,
        exported: Exported,
        reference: Reference,
        tolerance: tuple[float, float],
    ) -> MismatchStage:
        """Capture, translation, optimization or runtime (harness.exporters.dynamo_stages)."""
        from harness.exporters.dynamo_stages import mismatch_stage as attribute

        if exported.program is None:
            return MismatchStage(reason=NO_PROGRAM)
        return attribute(request, exported, reference, tolerance)

    def on_failure(self, request: ExportRequest, error: BaseException) -> FailureFacts:
        """The ATen ops captured before translation failed, the ops it found no translation
        for, and the exporter's own markdown report in the artifacts folder."""
        details = error.details if isinstance(error, StageFailure) else {}
        cause = error.error if isinstance(error, StageFailure) else error
        observed = details.get("observed")
        dynamo_report.write(
            request, observed if isinstance(observed, dynamo_report.Observed) else None
        )
        aten_ops = details.get("aten_ops")
        return FailureFacts(
            aten_ops if isinstance(aten_ops, dict) else None, unsupported_ops(cause)
        )
