"""The exporter's markdown report for a failed dynamo cell, without exporting it twice.

`torch.onnx.export(..., dynamo=True, report=True)` writes a report when the export fails:
which capture strategies worked, the errors, and from decomposition on, the program and
its analysis. The cell's own call is a user's call, with report=False. Re-running it with
report=True used to double the cost of every failing cell. Now the report is written from
what the cell's own call went through (the capture strategies' results, the programs and
the registry, observed by `phases`), by the exporter's own report writers, in the same
file name as the exporter would choose.

Where this torch lacks those writers, or the call failed where report=True writes no
error report (after translation), the export runs again with report=True, as before.
"""

from __future__ import annotations

import contextlib
import datetime
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from harness.exporters import phases
from harness.exporters.registry_memo import memoised
from harness.exporters.request import ExportRequest, quiet

if TYPE_CHECKING:
    from torch.onnx._internal.exporter._capture_strategies import Result
    from torch.onnx._internal.exporter._registration import ONNXRegistry
    from torch.onnx._internal.exporter._reporting import ExportStatus

# The capture strategy (its class name) -> the ExportStatus field it sets.
_STRATEGY_STATUS = {
    "TorchExportNonStrictStrategy": "torch_export_non_strict",
    "TorchExportStrictStrategy": "torch_export_strict",
    "TorchExportDraftExportStrategy": "torch_export_draft_export",
}


@dataclass(frozen=True)
class Observed:
    """What the failed call went through, as `phases` saw it."""

    error: BaseException  # what torch.onnx.export raised
    captures: Sequence[Result]  # the capture strategies' Results, in order
    captured: torch.export.ExportedProgram | None = None  # what decomposition started from
    decomposed: torch.export.ExportedProgram | None = None  # what translation started from
    registry: ONNXRegistry | None = None  # the ONNX registry the call built


def write(request: ExportRequest, observed: Observed | None) -> None:
    """The report the exporter writes for this failure, in the cell's artifacts folder
    (None: a failure no observed call met, e.g. one raised by a sample's own check)."""
    if request.artifacts is None:
        return
    request.artifacts.mkdir(parents=True, exist_ok=True)
    with quiet(), contextlib.suppress(Exception):
        # A writer that fails part way leaves what it wrote, as the exporter's does.
        if observed is None or not _from_failure(request.artifacts, observed):
            re_export(request)


def re_export(request: ExportRequest) -> None:
    """The failed call again with report=True: the exporter writes its own report."""
    assert request.artifacts is not None
    with memoised():
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


def _from_failure(folder: Path, observed: Observed) -> bool:
    """Write the report of a failed capture, decomposition or translation, as
    `torch.onnx._internal.exporter._core.export` does; False where it writes none."""
    try:
        from torch.onnx._internal.exporter import _analysis, _core, _errors, _reporting

        status = _reporting.ExportStatus()
        _reporting.create_torch_export_error_report  # noqa: B018 - present in this torch?
        _reporting.create_onnx_export_report  # noqa: B018
        _core._format_exceptions_for_all_strategies  # noqa: B018
    except (ImportError, AttributeError):
        return False
    if not observed.captures or any(r.strategy not in _STRATEGY_STATUS for r in observed.captures):
        return False  # nothing captured, or a strategy whose status field is not known here
    for result in observed.captures:
        setattr(status, _STRATEGY_STATUS[result.strategy], result.success)
    errors = _core._format_exceptions_for_all_strategies(
        [r for r in observed.captures if r.exception is not None]
    )
    if observed.captures and not any(r.success for r in observed.captures):
        _reporting.create_torch_export_error_report(
            _path(folder, status), errors, export_status=status, profile_result=None
        )
        return True
    cause = observed.error.__cause__
    if not isinstance(observed.error, _errors.ConversionError) or not isinstance(cause, Exception):
        return False
    if observed.captured is None:
        return False  # translation failed, but no program was seen captured
    errors = f"{errors}\n\n{_format_exception(cause)}"
    if observed.decomposed is None:
        status.decomposition = False
        program, comparison = observed.captured, None
    else:
        status.decomposition, status.onnx_translation = True, False
        program = observed.decomposed
        before, after = _analysis.compare_ops(observed.captured, observed.decomposed)
        comparison = _reporting.format_decomp_comparison(before, after)
    _reporting.create_onnx_export_report(
        _path(folder, status),
        errors,
        program,
        decomp_comparison=comparison,
        export_status=status,
        profile_result=None,
        registry=observed.registry,
    )
    return True


def _format_exception(error: Exception) -> str:
    """The traceback as the exporter formats it, less the frames of the phase timers the
    harness wrapped around its functions (they are not the exporter's)."""
    entries = traceback.format_exception(type(error), error, error.__traceback__)
    timer = f'  File "{phases.__file__}"'
    return "\n".join(e for e in entries if not e.startswith(timer))


def _path(folder: Path, status: ExportStatus) -> Path:
    from torch.onnx._internal.exporter import _reporting

    timestamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
    return folder / _reporting.construct_report_file_name(timestamp, status)
