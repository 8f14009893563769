"""Findings between two records of a sampled cell (an OpInfo at a dtype): each sample that
matched eager and no longer does (a numerics flip, or a failure), named with its inputs and
its error signature, and each one that matches again. The cell's own status change and the
op's coverage change are found elsewhere (status, op coverage); these say which samples."""

from __future__ import annotations

from dataclasses import dataclass

from harness.compare.findings import IMPROVEMENT, INFO, WARNING, Finding, finding
from harness.store.records import Record
from harness.store.status import Status

OK, SKIPPED = "ok", "skipped"


@dataclass(frozen=True)
class SampleState:
    """How one sample of a record went: its status (a Status value, `ok` or `skipped`) and,
    for a failing one, where and why, and its inputs."""

    status: str
    stage: str | None = None
    error_signature: str | None = None
    inputs: str | None = None


def sample_states(r: Record) -> dict[int, SampleState] | None:
    """Sample index -> its state for every sample the record can vouch for (a sample
    beyond the record's listing limit is left out); None where the record has no
    per-sample summary."""
    s = r.samples
    if s is None or s.indices is None:
        return None
    failures = {
        f.index: SampleState(f.status, f.stage, f.error_signature, f.inputs)
        for f in s.failures or ()
    }
    skips = {k.index for k in s.skips or ()}
    complete = len(failures) == (s.wrong or 0) + (s.failed or 0)
    complete = complete and len(skips) == (s.skipped or 0)
    states: dict[int, SampleState] = {}
    for i in s.indices:
        if i in failures:
            states[i] = failures[i]
        elif i in skips:
            states[i] = SampleState(SKIPPED)
        elif complete:
            states[i] = SampleState(OK)
    return states


def sample_findings(b: Record, c: Record) -> list[Finding]:
    before, after = sample_states(b), sample_states(c)
    if before is None or after is None:
        return []
    found = []
    for i in sorted(before.keys() & after.keys()):
        was, now = before[i], after[i]
        if was.status == now.status or SKIPPED in (was.status, now.status):
            continue
        found.append(_finding(c, i, was, now))
    return found


def _finding(c: Record, index: int, was: SampleState, now: SampleState) -> Finding:
    inputs = now.inputs or was.inputs
    what = f"sample {index}" + (f" ({inputs})" if inputs else "")
    if was.status == OK:
        flipped = Status.of(now.status).wrong_numbers
        kind = "sample_numerics_flipped" if flipped else "sample_failed"
        verb = "no longer matches eager" if flipped else f"now fails ({now.status} at {now.stage})"
        message = f"{what} {verb}: {now.error_signature}"
        return finding(kind, WARNING, c, message, OK, now.status)
    if now.status == OK:
        message = f"{what} matches eager again (was {was.status}: {was.error_signature})"
        return finding("sample_fixed", IMPROVEMENT, c, message, was.status, OK)
    message = f"{what}: {was.status} -> {now.status} ({now.error_signature})"
    return finding("sample_changed", INFO, c, message, was.status, now.status)
