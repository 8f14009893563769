"""The expected-status file (`expected/status.csv`): CI's ratchet, kept in the repository.

One `Expect` per row, in the grammar zoo entries use (harness.zoo.expect): the cell globs
(model, exporter, opset, device, shape, variant, patch, dtype, ORT optimisation), the
expected status, and optionally the stage and a regular expression the error must match.
Lines starting with `#` are comments. Files written before the stage/match/shape/variant/
patch columns existed still read (those columns then match anything); before the dtype and
ort_opt columns, a row is about the float32 cells under a default session (the only ones
there were). The last columns are written only where a row needs them (patch: a row that
names a patch; dtype, ort_opt: a row for another dtype or optimisation), so that a file of
plain float32 runs keeps the columns it had.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from harness.store.axes import AXES, LIST_AXES
from harness.store.status import Stage, Status
from harness.zoo.expect import ANY, Expect

# The cell columns every row has (the model, the exporter and the axes that are no list
# axis), the outcome's, then one optional column per list axis (harness.store.axes).
_CORE = tuple(a for a in AXES if a not in LIST_AXES)
_OUTCOME = ("expected_status", "stage", "match", "reason", "expires")
COLUMNS = (
    "model",
    "exporter",
    *(a.key_column for a in _CORE),
    *_OUTCOME,
    *(a.key_column for a in LIST_AXES),
)
REQUIRED = ("model", "exporter", "opset", "device", "expected_status")
HEADER = """\
# Expected status per cell: the CI ratchet of `harness compare` (see `harness compare --help`).
# A cell no row selects must pass (ok, xfail, skipped or xpass). Globs in the cell columns
# (model, exporter, opset, device, shape, variant, patch, dtype, ort_opt; a row without the
# last two is about float32 cells under a default ORT session); exact rows win over glob
# rows; a row past its `expires` date (ISO) is ignored. `stage` and `match` (a regular
# expression searched in the error) name the failure: a cell failing another way is not as
# expected.
# Regenerate from a run with: harness compare --update-expected RUN_DIR
"""


class ExpectedFileError(ValueError):
    """An expected-status file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class ExpectedFile:
    path: str
    rows: tuple[Expect, ...]


def read(path: Path) -> ExpectedFile:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ExpectedFileError(
            f"cannot read expected-status file {path}: {exc.strerror}"
        ) from None
    numbered = [
        (n, ln) for n, ln in enumerate(lines, 1) if ln.strip() and not ln.lstrip().startswith("#")
    ]
    if not numbered:
        return ExpectedFile(str(path), ())
    reader = csv.DictReader([ln for _, ln in numbered])
    missing = set(REQUIRED) - set(reader.fieldnames or ())
    if missing:
        raise ExpectedFileError(
            f"{path}: missing column(s) {', '.join(sorted(missing))}; expected {','.join(COLUMNS)}"
        )
    rows = tuple(_row(row, f"{path}:{numbered[i + 1][0]}") for i, row in enumerate(reader))
    return ExpectedFile(str(path), rows)


def _row(row: dict[str, str | None], source: str) -> Expect:
    def value(name: str) -> str:
        return (row.get(name) or "").strip()

    try:
        return Expect(
            value("exporter") or ANY,
            None,
            Status.of(value("expected_status")),
            Stage(value("stage")) if value("stage") else None,
            value("match") or None,
            value("reason"),
            date.fromisoformat(value("expires")) if value("expires") else None,
            model=value("model") or ANY,
            axes={
                a.key_column: value(a.key_column)
                or (ANY if a in _CORE else a.expectation_default())
                for a in AXES
            },
            source=source,
        )
    except ValueError as exc:  # unknown status or stage, a bad date, glob or pattern
        raise ExpectedFileError(f"{source}: {exc}") from None


def write(path: Path, rows: Sequence[Expect], *, header: str = HEADER) -> None:
    """Write the rows under `header` (comment lines, each starting with '#')."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        f.write(header)
        writer = csv.writer(f, lineterminator="\n")
        columns = columns_for(rows)
        writer.writerow(columns)
        writer.writerows(_fields(e)[: len(columns)] for e in rows)


def columns_for(rows: Sequence[Expect]) -> tuple[str, ...]:
    """The columns a file of these rows has: up to the last optional one a row needs (patch:
    a row that names one; dtype and ort_opt: a row about another dtype or optimisation), so
    that files of plain float32 runs stay as they were."""
    needed = [any(e.axes[a.key_column] != a.expectation_default() for e in rows) for a in LIST_AXES]
    last = max((i for i, need in enumerate(needed) if need), default=-1)
    return COLUMNS[: len(COLUMNS) - len(needed) + last + 1]


def _fields(e: Expect) -> list[str]:
    return [
        e.model,
        e.exporter,
        *(e.axes[a.key_column] for a in _CORE),
        str(e.status) if e.status is not None else ANY,
        str(e.stage) if e.stage is not None else "",
        e.match or "",
        e.reason,
        e.expires.isoformat() if e.expires else "",
        *(e.axes[a.key_column] for a in LIST_AXES),
    ]
