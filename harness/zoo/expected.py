"""A generated zoo's expected failures, kept as data beside it (`model_zoo/opinfo/_expected.csv`,
`model_zoo/transformers/_expected.csv`, in the Expect grammar) and rewritten from a run
(`harness zoo expected RUN_DIR`, harness.zoo.generated.catalog), as
onnxscript keeps `ops_test_data.py`'s xfails. One mechanism for every such zoo; a zoo
gives its header, its family and whether rows pin the error type (`ZooExpected`).

Unlike CI's ratchet (`harness compare --update-expected`, which records the statuses cells
ended in, after the zoo judged them), this file is what the zoo judges with: each row names
the failure itself (status, stage, optionally the error type) and why, so a cell that fails
that way is `xfail`, one that fails another way stays a failure, and one that passes is
`xpass`. From a run:

- a cell that failed deterministically (the export, the checker, ORT or the numbers) gets a
  row; a row that already named that failure keeps its reason and expiry (edited by hand
  or not);
- an `xfail` keeps the row that explained it;
- an `ok` or `xpass` cell loses its row (fixed);
- a cell without an outcome of its own (skipped, timeout, crash, out of memory: the
  machine's, not the exporter's) keeps whatever row it had;
- rows of cells outside the run stay. Where every opset of a cell failed alike, one row
  (`opset *`) says so; a run of one opset writes that opset.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.store.axes import AXES, OPSET, VARIANT, Axis
from harness.store.records import Record
from harness.store.status import Status
from harness.zoo import expected_file
from harness.zoo.expect import ANY, Expect, row_glob, varied_axes

DETERMINISTIC = frozenset(
    {
        Status.EXPORT_FAILED,
        Status.CHECKER_FAILED,
        Status.ORT_LOAD_FAILED,
        Status.ORT_RUN_FAILED,
        Status.NUMERICS_MISMATCH,
        Status.DYNAMIC_MISMATCH,
    }
)


@dataclass(frozen=True)
class ZooExpected:
    """One zoo's file of expected failures."""

    path: Path
    family: str  # only cells of this family get rows (a run may hold other zoos)
    header: str  # the comment block on top of the file: what it is, how to rewrite it
    pin_error_type: bool = False  # rows carry `match`: the error type the signature starts with

    def update(self, records: Iterable[Record]) -> tuple[int, int]:
        """Rewrite the file from a run's records (the latest attempt of each cell);
        the number of rows before and after."""
        old = expected_file.read(self.path).rows if self.path.is_file() else ()
        latest = {r.cell.key: r for r in records if r.family == self.family}
        rows = updated_rows(old, list(latest.values()), self)
        expected_file.write(self.path, rows, header=self.header)
        return len(old), len(rows)


# A group of rows: the model, the exporter and every axis but two: the opset (one row says
# where every opset failed alike) and the variant (the file is about the base environment).
Key = tuple[str, ...]
_KEY_AXES: tuple[Axis[object], ...] = tuple(a for a in AXES if a not in (OPSET, VARIANT))


def raw_status(record: Record) -> Status | None:
    """The status a cell ended in before its expectation judged it (xfail: its stage's
    failure status)."""
    if record.status is Status.XFAIL:
        return record.stage.failure_status if record.stage is not None else None
    return record.status


def updated_rows(
    old: Sequence[Expect], records: Sequence[Record], zoo: ZooExpected
) -> list[Expect]:
    groups: dict[Key, list[Record]] = {}
    for r in records:
        groups.setdefault(_key(r), []).append(r)
    kept = [e for e in old if not any(_names(e, key) for key in groups)]
    varied = varied_axes(records)
    fresh = [row for key, rs in groups.items() for row in _group_rows(key, rs, old, zoo, varied)]
    return sorted([*kept, *fresh], key=lambda e: e.globs)


def _key(r: Record) -> Key:
    return (r.model, r.exporter, *(a.glob_text(r.cell[a]) for a in _KEY_AXES))


def _group_rows(
    key: Key, records: Sequence[Record], old: Sequence[Expect], zoo: ZooExpected, varied: set[str]
) -> list[Expect]:
    """One model's rows for one exporter, device, shape, patch, dtype and ORT optimisation: one
    row for every opset where
    two or more opsets ran and each failed alike, else one per opset."""
    previous = [e for e in old if _names(e, key)]
    ordered = sorted(records, key=lambda r: r.opset)
    rows = [row for r in ordered if (row := _row(r, previous, zoo, varied))]
    if not rows:
        return []
    alike = {(e.status, e.stage, e.reason, e.match) for e in rows}
    if len(rows) == len(records) > 1 and len(alike) == 1:
        return [rows[0].with_(opset=ANY)]
    return rows


def _names(e: Expect, key: Key) -> bool:
    """The row is about this model, exporter, device, shape, patch, dtype and ORT
    optimisation (its globs select them)."""
    globs = (e.model, e.exporter, *(e.axes[a.key_column] for a in _KEY_AXES))
    return all(fnmatch.fnmatchcase(v, g) for v, g in zip(key, globs, strict=True))


def _row(
    r: Record, previous: Sequence[Expect], zoo: ZooExpected, varied: set[str]
) -> Expect | None:
    mine = [e.with_(opset=str(r.opset)) for e in previous if e.opset in (ANY, str(r.opset))]
    if r.status is Status.XFAIL:
        return next((e for e in mine if e.status is not None), None)
    status = raw_status(r)
    if status not in DETERMINISTIC:  # fixed (ok, xpass): no row; no outcome: keep the old one
        return None if r.status.passing else next(iter(mine), None)
    match = error_type_pattern(r) if zoo.pin_error_type else None
    same = next((e for e in mine if (e.status, e.stage, e.match) == (status, r.stage, match)), None)
    return Expect(
        r.exporter,
        str(r.opset),
        status,
        r.stage,
        match,
        reason=same.reason if same else reason_of(r),
        expires=same.expires if same else None,
        model=r.model,
        axes={a.key_column: row_glob(a, r.cell, varied) for a in _KEY_AXES},
    )


def error_type_pattern(r: Record) -> str | None:
    """'^DispatchError:': the error type the signature starts with (the root cause's), as
    a pattern; the signature comes first in the text an expectation searches."""
    signature = r.error_signature or ""
    kind = signature.split(":", 1)[0].strip()
    return f"^{re.escape(kind)}:" if kind and ":" in signature else None


def reason_of(r: Record) -> str:
    """What a new row says: the ops the exporter could not translate, else the error."""
    if r.export.unsupported_ops:
        return f"no {r.exporter} translation for {', '.join(r.export.unsupported_ops[:4])}"
    return (r.error_signature or r.reason or str(r.status))[:160]
