"""What a failing record says about its diagnosis, as one line: which stage changed the
numbers of a mismatch, and the cell's minimal repro (the report and the comparison both
show them)."""

from __future__ import annotations

from harness.store.records import Record


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
