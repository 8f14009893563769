"""What a comparison raises: a `Finding` (one thing that changed, with its evidence), its
severity, and the family its kind belongs to."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict, Unpack

from harness.store.diagnosis import repro_text
from harness.store.records import Cell, Record

Value = str | float | int | None

BLOCKING, WARNING, IMPROVEMENT, INFO = "blocking", "warning", "improvement", "info"
SEVERITIES = (BLOCKING, WARNING, IMPROVEMENT, INFO)

FAMILY_OF_KIND = {
    "status_regressed": "status",
    "status_fixed": "status",
    "status_changed": "status",
    "worse_than_expected": "expected",
    "failed_differently": "expected",
    "better_than_expected": "expected",
    "opset_changed": "opset",
    "numerics_flipped": "numerics",
    "numerics_fixed": "numerics",
    "numerics_error_grew": "numerics",
    "unsupported_op_new": "ops",
    "aten_op_lost": "ops",
    "op_coverage_lost": "ops",
    "op_coverage_gained": "ops",
    "sample_numerics_flipped": "numerics",
    "sample_failed": "ops",
    "sample_fixed": "ops",
    "sample_changed": "ops",
    "cell_appeared": "cells",
    "cell_vanished": "cells",
    "night_shift": "run",
    "run_shift": "run",
    "paired_regressed": "ort_latency",
    "paired_improved": "ort_latency",
    "paired_unknown": "ort_latency",
    "workaround_obsolete": "workarounds",
    "workaround_needed": "workarounds",
    "slower_than_exporter": "exporter_speed",
    "exporter_speed_fixed": "exporter_speed",
}


class CompareError(Exception):
    """Runs that cannot be compared."""


@dataclass(frozen=True)
class Finding:
    """One thing that changed, with the evidence that it did. `cell` is None for run-wide ones."""

    kind: str
    severity: str
    message: str
    cell: Cell | None = None
    metric: str | None = None
    baseline: Value = None
    candidate: Value = None
    ratio: float | None = None
    threshold: float | None = None
    evidence: str | None = None
    # The candidate cell's minimal repro (harness repro): its script, relative to the
    # candidate's run directory, and what it showed.
    repro: str | None = None
    repro_note: str | None = None

    @property
    def family(self) -> str:
        return self.metric or FAMILY_OF_KIND[self.kind]

    def to_dict(self) -> dict[str, object]:
        cell = self.cell
        return {
            "kind": self.kind,
            "family": self.family,
            "severity": self.severity,
            "model": cell.model if cell else None,
            "exporter": cell.exporter if cell else None,
            "opset": cell.opset if cell else None,
            "device": cell.device if cell else None,
            "dynamic": cell.dynamic if cell else None,
            "variant": cell.variant if cell else None,
            "message": self.message,
            "metric": self.metric,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "ratio": self.ratio,
            "threshold": self.threshold,
            "evidence": self.evidence,
            "repro": self.repro,
            "repro_note": self.repro_note,
        }


class More(TypedDict, total=False):
    """A finding's other fields, as `finding` takes them."""

    metric: str | None
    ratio: float | None
    threshold: float | None
    evidence: str | None
    repro: str | None
    repro_note: str | None


def finding(
    kind: str,
    severity: str,
    r: Record,
    message: str,
    base: Value = None,
    cand: Value = None,
    **more: Unpack[More],
) -> Finding:
    """A finding about the cell of record `r`, with its minimal repro where it has one."""
    repro = (
        r.artifacts.get("minimal_repro")
        if not r.status.passing or r.status.by_expectation
        else None
    )
    more.setdefault("repro", repro)
    more.setdefault("repro_note", repro_text(r) if repro else None)
    return Finding(kind, severity, message, cell=r.cell, baseline=base, candidate=cand, **more)


def sorted_findings(found: Iterable[Finding]) -> list[Finding]:
    """Blocking first, then by family and cell: the order every output lists them in."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(found, key=lambda f: (order[f.severity], f.family, f.cell.key if f.cell else ()))


def failure_text(r: Record) -> str:
    """'export_failed at translate (NotImplementedError: ...)', for messages."""
    where = f" at {r.stage}" if r.stage else ""
    error = r.error_signature or r.error_message or r.reason
    return f"{r.status}{where}" + (f" ({error})" if error else "")


def few(names: Iterable[str], n: int = 5) -> str:
    """'a, b, c, d, e and 3 more'."""
    unique = sorted(set(names))
    return ", ".join(unique[:n]) + (f" and {len(unique) - n} more" if len(unique) > n else "")
