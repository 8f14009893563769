"""The TorchDynamo-based exporter of torch 2.1-2.8 (`torch.onnx.dynamo_export`): its
cells are skipped where the installed torch no longer has it."""

from __future__ import annotations

import torch

from harness.cell.shapes import Inputs
from harness.cell.stages import stage
from harness.exporters.request import Exported, ExportRequest, Opaque, Unavailable, quiet


class Adapter(Opaque):
    """The exporter adapter (harness.exporters.ExporterAdapter)."""

    name, call = "dynamo-legacy", "torch.onnx.dynamo_export"

    def refuses(self, model: torch.nn.Module) -> str | None:
        return None

    def sample(self) -> tuple[torch.nn.Module, Inputs] | None:
        return None

    def unavailable(self) -> str | None:
        if hasattr(torch.onnx, "dynamo_export"):
            return None
        return f"torch {torch.__version__} has no torch.onnx.dynamo_export (removed in torch 2.9)"

    def export(self, request: ExportRequest) -> Exported:
        legacy = getattr(torch.onnx, "dynamo_export", None)
        if legacy is None:
            raise Unavailable(self.unavailable())
        r = request
        with quiet():
            with stage("translate") as t:
                options = torch.onnx.ExportOptions(dynamic_shapes=r.dynamic_shapes is not None)  # type: ignore[attr-defined]
                program = legacy(r.model, *r.inputs.args, export_options=options, **r.inputs.kwargs)
            with stage("save") as s:
                program.save(str(r.path))
        return Exported(r.path, {"translate": t.seconds, "save": s.seconds})
