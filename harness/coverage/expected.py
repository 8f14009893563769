"""A zoo's expected failures kept as data (`model_zoo/opinfo/_expected.csv`, the Expect
grammar): rewritten from a run, as onnxscript keeps `ops_test_data.py`'s xfails.

Unlike CI's ratchet (`harness compare --update-expected`, which records the statuses cells
ended in, after the zoo judged them), this file is what the zoo judges with: each row
names the failure itself (status, stage) and why, so a cell that fails that way is
`xfail` and one that passes is `xpass`. From a run: a cell that failed (with a stage) gets
a row; an `xfail` keeps the row that explained it (its reason, edited by hand or not); an
`ok` or `xpass` cell loses its row (fixed); a cell that did not run to an outcome (skipped,
timeout, crash) keeps whatever row it had. Rows of cells outside the run stay.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import replace

from harness.plan.expect import ANY, Expect
from harness.store.records import Record
from harness.store.status import Status

HEADER = """\
# Expected failures of the opinfo zoo (model_zoo/opinfo/), per (OpInfo, dtype) entry and
# exporter: a cell that fails with this status at this stage is `xfail` (with the reason);
# one that passes is `xpass` (the op got fixed: rewrite this file). Same grammar as
# expected/status.csv (`*` globs; the most specific row wins; `match`: a regular expression
# the error must contain; `expires`: an ISO date). Reasons may be edited by hand: a rewrite
# keeps a row's reason while its status and stage stay.
# Rewrite from a run with: harness coverage --update-expected RUN_DIR
"""

Key = tuple[str, str, str]  # model, exporter, device


def updated_rows(old: Sequence[Expect], records: Sequence[Record]) -> list[Expect]:
    groups: dict[Key, list[Record]] = {}
    for r in records:
        groups.setdefault((r.model, r.exporter, r.device), []).append(r)
    kept = [e for e in old if not any(_names(e, key) for key in groups)]
    fresh = [row for key, rs in groups.items() for row in _group_rows(key, rs, old)]
    return sorted([*kept, *fresh], key=lambda e: (e.model, e.exporter, e.device, e.opset))


def _group_rows(key: Key, records: Sequence[Record], old: Sequence[Expect]) -> list[Expect]:
    """One model's rows for one exporter and device: one row for every opset where each
    opset failed alike, else one per opset."""
    previous = [e for e in old if _names(e, key)]
    rows = [row for r in sorted(records, key=lambda r: r.opset) if (row := _row(r, previous))]
    if not rows:
        return []
    alike = {(e.status, e.stage, e.reason, e.match) for e in rows}
    if len(rows) == len(records) and len(alike) == 1:
        return [replace(rows[0], opset=ANY)]
    return rows


def _names(e: Expect, key: Key) -> bool:
    """The row is about this model, exporter and device (its globs select them)."""
    return all(
        fnmatch.fnmatchcase(v, g) for v, g in zip(key, (e.model, e.exporter, e.device), strict=True)
    )


def _row(r: Record, previous: Sequence[Expect]) -> Expect | None:
    mine = [e for e in previous if e.opset in (ANY, str(r.opset))]
    if r.status is Status.XFAIL:
        return next((replace(e, opset=str(r.opset)) for e in mine if e.status is not None), None)
    if r.status.passing or not r.status.ran:
        # ok or xpass: fixed, no row; skipped: nothing to say, keep what was there
        return None if r.status.ran else next((replace(e, opset=str(r.opset)) for e in mine), None)
    if r.stage is None:  # a timeout or a crash: not a way of failing to expect
        return next((replace(e, opset=str(r.opset)) for e in mine), None)
    # A row with a `match` that named this status and stage did not explain the error.
    same = next(
        (e for e in mine if e.status is r.status and e.stage is r.stage and e.match is None),
        None,
    )
    return Expect(
        r.exporter,
        str(r.opset),
        r.status,
        r.stage,
        reason=same.reason if same else reason_of(r),
        expires=same.expires if same else None,
        model=r.model,
        device=r.device,
    )


def reason_of(r: Record) -> str:
    """What a new row says: the ops the exporter could not translate, else the error."""
    if r.unsupported_ops:
        return f"no {r.exporter} translation for {', '.join(r.unsupported_ops[:4])}"
    return (r.error_signature or r.reason or str(r.status))[:160]
