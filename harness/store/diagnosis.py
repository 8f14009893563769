"""What a failing record says about its diagnosis, as one line: which stage changed the
numbers of a mismatch, and the cell's minimal repro (the report and the comparison both
show them)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

from harness.store.records import Record

# A frame of one of the exporters' passes in a traceback: torch's FX passes
# (torch/onnx/_internal/fx/passes/type_promotion.py), onnxscript's rewrite rules
# (onnxscript/rewriter/rules/common/_fuse_batchnorm.py)
PASS_FRAME = re.compile(r'File "[^"]*/(?:passes|rewriter/rules/\w+)/(\w+)\.py", line \d+, in (\w+)')


def mismatch_stage_text(record: Record) -> str | None:
    """'optimization: RewritePass (iteration 1), rule FoldSinOfCos': which stage changed the
    numbers of a mismatch (and which optimizer step), or why none is named."""
    found = record.numerics.mismatch_stage
    if found is None:
        return None
    if not found.stage:
        return found.reason
    step = found.optimizer_step or {}
    named = ", ".join(
        str(s) for s in (step.get("pass"), step.get("rule") and f"rule {step['rule']}") if s
    )
    return f"{found.stage}: {named}" if named else found.stage


def repro_text(record: Record) -> str | None:
    """'reproduces, 163 -> 1 nodes': the cell's minimal repro and what its fresh-process run
    showed; its reason where no script was made; None where none was attempted."""
    found = record.minimal_repro
    if found is None:
        return None
    module = found.module  # a module-level repro (harness.repro.modules)
    if (found.nodes_after is None and not module) or not record.artifacts.get("minimal_repro"):
        return f"no repro: {found.reason or 'no reason given'}"
    verdict = "reproduces" if found.reproduces else "does not reproduce"
    if found.reproduces is None:
        verdict = "not run"
    if module:
        return (
            f"{verdict}, module {module} ({found.params_before} -> {found.params_after} parameters)"
        )
    return f"{verdict}, {found.nodes_before} -> {found.nodes_after} nodes"


def failing_pass(record: Record, run_dir: Path | None = None) -> str | None:
    """Where a failing cell went wrong, as a bisection names it: for wrong numbers, the
    stage and optimizer rule that changed them (`mismatch_stage_text`); for a failure with
    a traceback (its `error` artifact, under `run_dir`), the deepest exporter pass in it,
    'type_promotion (find_compatible_op_overload)'; None where neither is known."""
    if record.passed:
        return None
    if record.numerics.mismatch_stage is not None and record.numerics.mismatch_stage.stage:
        return mismatch_stage_text(record)
    text = record.error_message or ""
    error = record.artifacts.get("error")
    if error and run_dir is not None:
        with contextlib.suppress(OSError):
            text = (run_dir / error).read_text(errors="replace") + text
    found = PASS_FRAME.findall(text)
    return f"{found[-1][0]} ({found[-1][1]})" if found else None
