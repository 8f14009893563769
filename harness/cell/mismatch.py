"""A numerics mismatch, diagnosed: the first divergent node (harness.cell.divergence) and
the stage that changed the numbers (capture, translation, optimization, runtime), with the
optimizer step where it was the optimizer; both into the cell's measurements."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.cell.exporters import Exporter
from harness.cell.exporters.request import Exported, ExportRequest
from harness.store.details import Divergence, MismatchStage
from harness.store.records import Measurements


def diagnose(
    exporter: Exporter,
    request: ExportRequest,
    exported: Exported,
    reference: Any,
    tolerance: tuple[float, float],
    m: Measurements,
) -> None:
    found = exporter.first_divergence(request, exported, tolerance)
    stage = exporter.mismatch_stage(request, exported, reference, tolerance)
    m.numerics = replace(
        m.numerics,
        first_divergence=Divergence.from_dict(with_stage(found, stage)),
        mismatch_stage=MismatchStage.from_dict(stage),
    )


def with_stage(found: dict[str, Any], stage: dict[str, Any]) -> dict[str, Any]:
    """Where the program itself differs from eager, no ONNX node is wrong: every one
    follows the program. Say so instead of 'the difference is in the final outputs'."""
    if stage.get("stage") != "capture" or found.get("node"):
        return found
    compared = found.get("compared")
    agree = (
        f": all {compared} intermediate values of the ONNX graph agree with it" if compared else ""
    )
    reason = f"the exported program itself differs from eager (capture){agree}"
    return {**found, "reason": reason}
