"""The TorchDynamo-based exporter of torch 2.1-2.8 (`torch.onnx.dynamo_export`): its
cells are skipped where the installed torch no longer has it."""

from __future__ import annotations

from typing import Any

import torch

from harness.cell.exporters.request import Exported, ExportRequest, FailureFacts, Unavailable, quiet
from harness.cell.stages import stage


def unavailable() -> str | None:
    if hasattr(torch.onnx, "dynamo_export"):
        return None
    return f"torch {torch.__version__} has no torch.onnx.dynamo_export (removed in torch 2.9)"


def export(request: ExportRequest) -> Exported:
    legacy = getattr(torch.onnx, "dynamo_export", None)
    if legacy is None:
        raise Unavailable(unavailable())
    r = request
    with quiet():
        with stage("translate") as t:
            options = torch.onnx.ExportOptions(dynamic_shapes=r.dynamic_shapes is not None)  # type: ignore[attr-defined]
            program = legacy(r.model, *r.inputs.args, export_options=options, **r.inputs.kwargs)
        with stage("save") as s:
            program.save(str(r.path))
    return Exported(r.path, {"translate": t.seconds, "save": s.seconds})


def aten_ops(request: ExportRequest, exported: Exported) -> dict[str, int] | None:
    return None


def first_divergence(
    request: ExportRequest, exported: Exported, tolerance: tuple[float, float]
) -> dict[str, Any]:
    return {"reason": "not located for torch.onnx.dynamo_export"}


def on_failure(request: ExportRequest, error: BaseException) -> FailureFacts:
    return FailureFacts()
