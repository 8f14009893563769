"""What a failing record says about its diagnosis, as one line: which stage changed the
numbers of a mismatch, and the cell's minimal repro (the report and the comparison both
show them)."""

from __future__ import annotations

from harness.store.records import Record


def mismatch_stage_text(record: Record) -> str | None:
    """'optimization: RewritePass (iteration 1), rule FoldSinOfCos': which stage changed the
    numbers of a mismatch (and which optimizer step), or why none is named."""
    found = record.mismatch_stage
    if not found:
        return None
    if not found.get("stage"):
        return found.get("reason")
    step = found.get("optimizer_step") or {}
    named = ", ".join(
        s for s in (step.get("pass"), step.get("rule") and f"rule {step['rule']}") if s
    )
    return f"{found['stage']}: {named}" if named else str(found["stage"])


def repro_text(record: Record) -> str | None:
    """'reproduces, 163 -> 1 nodes': the cell's minimal repro and what its fresh-process run
    showed; its reason where no script was made; None where none was attempted."""
    found = record.minimal_repro
    if not found:
        return None
    if found.get("nodes_after") is None or not record.artifacts.get("minimal_repro"):
        return f"no repro: {found.get('reason') or 'no reason given'}"
    reproduces = found.get("reproduces")
    verdict = "reproduces" if reproduces else "does not reproduce"
    if reproduces is None:
        verdict = "not run"
    return f"{verdict}, {found.get('nodes_before')} -> {found['nodes_after']} nodes"
