"""The expected-status file (`expected/status.csv`): CI's ratchet, kept in the repository.

One `Expect` per row, in the grammar zoo entries use (harness.zoo.expect): the cell globs
(model, exporter, opset, device, shape, variant, patch), the expected status, and optionally
the stage and a regular expression the error must match. Lines starting with `#` are
comments. Files written before the stage/match/shape/variant/patch columns existed still
read (those columns then match anything); a file whose rows all match any patch is written
without the patch column, as before it existed (the last column where it is written).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from harness.store.status import Stage, Status
from harness.zoo.expect import ANY, Expect

COLUMNS = (
    "model",
    "exporter",
    "opset",
    "device",
    "shape",
    "variant",
    "expected_status",
    "stage",
    "match",
    "reason",
    "expires",
    "patch",
)
REQUIRED = ("model", "exporter", "opset", "device", "expected_status")
HEADER = """\
# Expected status per cell: the CI ratchet of `harness compare` (see `harness compare --help`).
# A cell no row selects must pass (ok, xfail, skipped or xpass). Globs in the cell columns
# (model, exporter, opset, device, shape, variant); exact rows win over glob rows; a row past
# its `expires` date (ISO) is ignored. `stage` and `match` (a regular expression searched in
# the error) name the failure: a cell failing another way is not as expected.
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
            value("opset") or ANY,
            Status.of(value("expected_status")),
            Stage(value("stage")) if value("stage") else None,
            value("match") or None,
            value("reason"),
            date.fromisoformat(value("expires")) if value("expires") else None,
            model=value("model") or ANY,
            device=value("device") or ANY,
            shape=value("shape") or ANY,
            variant=value("variant") or ANY,
            patch=value("patch") or ANY,
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
    """The columns a file of these rows has: the patch column (the last) only where a row
    names a patch, so that files of runs without patches stay as they were."""
    return COLUMNS if any(e.patch != ANY for e in rows) else COLUMNS[:-1]


def _fields(e: Expect) -> list[str]:
    return [
        e.model,
        e.exporter,
        e.opset,
        e.device,
        e.shape,
        e.variant,
        str(e.status) if e.status is not None else ANY,
        str(e.stage) if e.stage is not None else "",
        e.match or "",
        e.reason,
        e.expires.isoformat() if e.expires else "",
        e.patch,
    ]
