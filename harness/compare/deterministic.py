"""Deterministic findings: exact comparisons of two records of a cell (status, opset,
numerics, unsupported ops), of the cells present, and of the ATen op coverage per exporter.
No noise to account for: what differs, differs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness.compare.findings import (
    BLOCKING,
    IMPROVEMENT,
    INFO,
    WARNING,
    Finding,
    failure_text,
    few,
    finding,
)
from harness.compare.samples import sample_findings
from harness.compare.thresholds import Thresholds
from harness.coverage import matrix as coverage
from harness.store.diagnosis import mismatch_stage_text
from harness.store.records import CellKey, OutputCheck, Record
from harness.store.runs import Run
from harness.store.status import Status


def deterministic_findings(base: Run, cand: Run, t: Thresholds) -> list[Finding]:
    """Every deterministic finding between two runs: per cell, cells present, op coverage."""
    b, c = base.by_cell(), cand.by_cell()
    found = presence_findings(b, c)
    for key in sorted(b.keys() & c.keys()):
        found.extend(cell_findings(b[key], c[key], t))
    found += aten_op_lost_findings(list(b.values()), list(c.values()))
    return found + op_coverage_findings(list(b.values()), list(c.values()))


def cell_findings(b: Record, c: Record, thresholds: Thresholds) -> list[Finding]:
    """Every deterministic finding between two records of the same cell. A sampled cell's
    flips are named per sample, with the sample's inputs and error (compare.samples)."""
    numerics = numerics_findings(b, c, growth=thresholds.numerics_growth)
    if c.samples is not None:
        numerics = [f for f in numerics if f.kind == "numerics_error_grew"]
    return [
        *status_findings(b, c),
        *opset_findings(b, c),
        *numerics,
        *sample_findings(b, c),
        *unsupported_op_findings(b, c),
        *workaround_findings(b, c),
    ]


def workaround_findings(b: Record, c: Record) -> list[Finding]:
    """transformers' workarounds (`harness debt`) a cell needed in the baseline and no
    longer needs (obsolete: an exporter bug fixed), and those it newly needs (a bug it
    now works around), where both runs searched them."""
    if b.workarounds is None or c.workarounds is None:
        return []
    before, now = set(b.workarounds.needed), set(c.workarounds.needed)
    tried = set(c.workarounds.tried)
    found = [
        finding("workaround_obsolete", IMPROVEMENT, c, f"no longer needs {name}", "needed", "not")
        for name in sorted((before - now) & tried)
    ]
    found += [
        finding("workaround_needed", INFO, c, f"now needs {name}", "not", "needed")
        for name in sorted(now - before)
    ]
    return found


# -- status ---------------------------------------------------------------------------------


def _status_kind_and_severity(base: Status, cand: Status) -> tuple[str, str] | None:
    rb, rc = base.rank, cand.rank
    if base is cand:
        return None
    if rb == 0 and rc > 0:
        return "status_regressed", BLOCKING  # not_attempted too: an unverified cell never passes
    if rb > 0 and rc == 0:
        return "status_fixed", IMPROVEMENT
    if rc > rb:
        return "status_changed", WARNING
    if rc < rb or cand is Status.XPASS:
        return "status_changed", IMPROVEMENT
    if base is Status.OK and cand in (Status.XFAIL, Status.SKIPPED):
        return "status_changed", WARNING  # it passed; now it is expected to fail or skipped
    return "status_changed", INFO


def status_findings(b: Record, c: Record) -> list[Finding]:
    found = _status_kind_and_severity(b.status, c.status)
    if found is None:
        if b.status is Status.OK or not c.error_signature:
            return []
        if b.error_signature == c.error_signature:
            return []
        message = f"still {c.status}, new error: {c.error_signature}"
        return [finding("status_changed", INFO, c, message, b.error_signature, c.error_signature)]
    kind, severity = found
    if c.status.rank:
        message = f"{b.status} -> {failure_text(c)}"
    else:
        message = f"{failure_text(b)} -> {c.status}"
    facts = (
        c.divergence_text and f"first divergent node: {c.divergence_text}",
        (stage := mismatch_stage_text(c)) and f"changed by: {stage}",
    )
    where = "; ".join(f for f in facts if f) or None
    return [finding(kind, severity, c, message, b.status, c.status, evidence=where)]


# -- opset, numerics, unsupported ops -------------------------------------------------------


def opset_findings(b: Record, c: Record) -> list[Finding]:
    if (
        b.export.opset_actual is None
        or c.export.opset_actual is None
        or b.export.opset_actual == c.export.opset_actual
    ):
        return []
    message = (
        f"opset_actual {b.export.opset_actual} -> {c.export.opset_actual} (requested {c.opset})"
    )
    return [
        finding("opset_changed", WARNING, c, message, b.export.opset_actual, c.export.opset_actual)
    ]


def numerics_findings(b: Record, c: Record, *, growth: float) -> list[Finding]:
    """Per output (matched by name): ok flipped, or max error grown `growth`-fold within
    tolerance. A flip is a warning that names the output: the status change it comes with
    (numerics_mismatch) is what blocks."""
    if b.numerics.checks is None or c.numerics.checks is None:
        return []
    before = {o.name: o for o in b.numerics.checks}
    pairs = [(before[o.name], o) for o in c.numerics.checks if o.name in before]
    return [f for old, new in pairs if (f := _output_finding(old, new, c, growth))]


def _output_finding(old: OutputCheck, new: OutputCheck, c: Record, growth: float) -> Finding | None:
    tol = f"rtol={new.rtol:g} atol={new.atol:g}"
    values = (old.max_abs, new.max_abs)
    if old.ok and not new.ok:
        message = f"output {new.name} no longer within tolerance: max_abs {old.max_abs} -> {new.max_abs} ({tol})"
        return finding("numerics_flipped", WARNING, c, message, *values)
    if not old.ok and new.ok:
        message = f"output {new.name} within tolerance again ({tol})"
        return finding("numerics_fixed", IMPROVEMENT, c, message, *values)
    if not (
        old.ok and old.max_abs and new.max_abs is not None and new.max_abs >= growth * old.max_abs
    ):
        return None
    ratio = new.max_abs / old.max_abs
    message = f"output {new.name} max_abs grew {ratio:.0f}x, still within {tol}"
    return finding(
        "numerics_error_grew", WARNING, c, message, *values, ratio=ratio, threshold=growth
    )


def _unsupported(r: Record) -> list[str] | None:
    """The record's unsupported ATen ops; a cell that exported has none, even when unrecorded."""
    if r.export.unsupported_ops is None and r.status.exported:
        return []
    return r.export.unsupported_ops


def unsupported_op_findings(b: Record, c: Record) -> list[Finding]:
    before, now = _unsupported(b), _unsupported(c)
    if before is None or now is None:
        return []
    new = sorted(set(now) - set(before))
    message = "new unsupported ATen op {} (" + c.status + ")"
    return [finding("unsupported_op_new", WARNING, c, message.format(op), None, op) for op in new]


# -- cells present --------------------------------------------------------------------------


def presence_findings(base: dict[CellKey, Record], cand: dict[CellKey, Record]) -> list[Finding]:
    found = []
    for k in sorted(cand.keys() - base.keys()):
        r = cand[k]
        found.append(finding("cell_appeared", INFO, r, f"new cell ({r.status})", None, r.status))
    for k in sorted(base.keys() - cand.keys()):
        r = base[k]
        message = f"cell missing from the candidate (was {r.status})"
        found.append(finding("cell_vanished", WARNING, r, message, r.status, None))
    return found


# -- ATen op coverage (run-wide, per exporter) ----------------------------------------------


def _ops_by_exporter(records: Iterable[Record], *, ok: bool) -> dict[str, dict[str, list[str]]]:
    """exporter -> ATen op -> models whose (ok or not ok) cells captured it."""
    table: dict[str, dict[str, list[str]]] = {}
    for r in records:
        if r.export.aten_ops is None or r.status.exported != ok:
            continue
        ops = list(r.export.aten_ops) + ([] if ok else list(r.export.unsupported_ops or ()))
        for op in ops:
            table.setdefault(r.exporter, {}).setdefault(op, []).append(r.model)
    return table


def aten_op_lost_findings(base: Sequence[Record], cand: Sequence[Record]) -> list[Finding]:
    """ATen ops that some ok cell exported in the baseline and that now appear only in
    failing cells of the same exporter (an op that vanished from the suite is no finding)."""
    covered_before = _ops_by_exporter(base, ok=True)
    covered_now = _ops_by_exporter(cand, ok=True)
    found = []
    for exporter, ops in sorted(_ops_by_exporter(cand, ok=False).items()):
        for op, models in sorted(ops.items()):
            was_ok_in = covered_before.get(exporter, {}).get(op)
            if not was_ok_in or op in covered_now.get(exporter, {}):
                continue
            message = (
                f"{op} no longer exports with {exporter}: only in failing cells ({few(models)})"
            )
            evidence = f"exported in the baseline by {few(was_ok_in)}"
            found.append(Finding("aten_op_lost", WARNING, message, candidate=op, evidence=evidence))
    return found


def op_coverage_findings(base: Sequence[Record], cand: Sequence[Record]) -> list[Finding]:
    """Per exporter and opset (harness.coverage.matrix): an op that exported and matched in the
    baseline and now fails or gives wrong numbers blocks, naming the zoo models that use
    it; a newly covered op is an improvement. Op cells name their users from the inventory.
    OpInfo cells are compared per (OpInfo, dtype, exporter, opset)."""
    usage = coverage.usage_for(cand)
    found = []
    for change in coverage.coverage_changes(base, cand, usage=usage):
        was, now = change.before.state, change.after.state
        where = f"{change.column.exporter} at opset {change.column.opset} ({change.column.label})"
        users = f"used by {few(change.usage)}" if change.usage else "no zoo model recorded"
        if change.lost:
            kind, severity = "op_coverage_lost", BLOCKING
            message = f"{change.op} no longer covered with {where}: {coverage.STATE_TEXT[now]}"
        else:
            kind, severity = "op_coverage_gained", IMPROVEMENT
            message = f"{change.op} now covered with {where}, was {coverage.STATE_TEXT[was]}"
        found.append(
            Finding(
                kind,
                severity,
                f"{message}; {users}",
                cell=change.after.cell,
                baseline=was,
                candidate=now,
                evidence=change.after.signature or change.before.signature,
            )
        )
    return found
