"""A numerics mismatch, diagnosed: the first divergent node (harness.cell.divergence) and
the stage that changed the numbers (capture, translation, optimization, runtime), with the
optimizer step where it was the optimizer; both into the cell's measurements."""

from __future__ import annotations

from dataclasses import replace

from harness.cell.reference import Reference
from harness.exporters import Exporter
from harness.exporters.request import Exported, ExportRequest
from harness.store.details import Divergence, MismatchStage
from harness.store.records import Measurements


def diagnose(
    exporter: Exporter,
    request: ExportRequest,
    exported: Exported,
    reference: Reference,
    tolerance: tuple[float, float],
    m: Measurements,
) -> None:
    found = exporter.first_divergence(request, exported, tolerance)
    stage = exporter.mismatch_stage(request, exported, reference, tolerance)
    m.numerics = replace(
        m.numerics, first_divergence=with_stage(found, stage), mismatch_stage=stage
    )


def with_stage(found: Divergence, stage: MismatchStage) -> Divergence:
    """Where the program itself differs from eager, no ONNX node is wrong: every one
    follows the program. Say so instead of 'the difference is in the final outputs'."""
    if stage.stage != "capture" or found.node:
        return found
    agree = (
        f": all {found.compared} intermediate values of the ONNX graph agree with it"
        if found.compared
        else ""
    )
    reason = f"the exported program itself differs from eager (capture){agree}"
    return replace(found, reason=reason)
