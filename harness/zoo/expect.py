"""Expected outcomes: one type and one matching grammar for a zoo entry's `expect=` and for
the expected-status file (`expected/status.csv`).

An `Expect` selects cells (model, exporter, opset, device, shape, variant, patch, dtype, ORT
optimisation: each a glob) and names the outcome it expects: a status, the stage a failure happens at, and a regular
expression its error must contain. A cell the expectation selects but that fails some
other way is a failure, shown with the expectation it did not match: a new way of failing
never hides behind an old expectation.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from harness.store.axes import ANY as ANY
from harness.store.axes import AXES, DTYPE, LIST_AXES, ORT_OPT, Axis
from harness.store.records import Cell, Record
from harness.store.status import Stage, Status

DEFAULT_DTYPE, DEFAULT_ORT_OPT = DTYPE.expectation_default(), ORT_OPT.expectation_default()
_COLUMN = {axis.key_column: axis for axis in AXES}  # shape -> the dynamic axis


@dataclass(frozen=True, init=False)
class Expect:
    """Cells matching the globs are expected to end in `status` (at `stage`, with an error
    matching `match`), for `reason`, until `expires`.

    The globs are the model's, the exporter's and one per axis (harness.store.axes), named
    by the axis's expected-file column (`opset`, `device`, `shape`, `variant`, `patch`,
    `dtype`, `ort_opt`, ...). An axis left out selects any value, or only its default where
    the axis says so (dtype and ORT optimisation: an expectation is about the cells it was
    written for, the model's own float32 under a default session, unless it says otherwise,
    `*` for every one; a float32 failure must not make a float16 cell's look expected).

    `status=None` is the legacy form `(match, reason)` of zoo entries: any failure."""

    exporter: str
    status: Status | None
    stage: Stage | None
    match: str | None  # a regular expression searched in the error
    reason: str
    expires: date | None
    model: str
    axes: dict[str, str]  # column -> glob, every axis
    source: str = field(compare=False)  # where it is written (file:line)

    def __init__(
        self,
        exporter: str = ANY,
        opset: str | int | None = None,
        status: Status | str | None = Status.EXPORT_FAILED,
        stage: Stage | str | None = None,
        match: str | None = None,
        reason: str = "",
        expires: date | None = None,
        *,
        model: str = ANY,
        source: str = "",
        axes: dict[str, str] | None = None,
        **globs: str | int,
    ) -> None:
        if unknown := sorted(set(globs) - set(_COLUMN)):
            raise TypeError(f"Expect has no axis {unknown[0]!r} (axes: {', '.join(_COLUMN)})")
        given = {**(axes or {}), **{k: str(v) for k, v in globs.items()}}
        if opset is not None:
            given["opset"] = str(opset)
        chosen = {c: given.get(c, a.expectation_default()) for c, a in _COLUMN.items()}
        for column, glob in chosen.items():
            _check_glob(_COLUMN[column], glob)
        if match is not None:
            re.compile(match)  # a bad pattern fails where it is written
        fields = {
            "exporter": exporter,
            "status": None if status is None else Status.of(status),
            "stage": None if stage is None else Stage(stage),
            "match": match,
            "reason": reason,
            "expires": expires,
            "model": model,
            "axes": chosen,
            "source": source,
        }
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, column: str) -> str:
        """An axis's glob by its column: `e.opset`, `e.shape`, `e.dtype`."""
        axes = self.__dict__.get("axes", {})
        if column in axes:
            return str(axes[column])
        raise AttributeError(column)

    def with_(self, **changes: object) -> Expect:
        """The same expectation with some fields or axis globs changed."""
        fields = {k: v for k, v in self.__dict__.items() if k != "axes"}
        axes = {**self.axes, **{k: str(v) for k, v in changes.items() if k in _COLUMN}}
        fields |= {k: v for k, v in changes.items() if k not in _COLUMN}
        return Expect(axes=axes, **fields)  # type: ignore[arg-type]

    @classmethod
    def legacy(cls, pattern: str, reason: str) -> Expect:
        """The zoo's older `(EXPORTER[/OPSET[/DEVICE[/static|dynamic]]], reason)` tuple:
        any failure of the matching cells."""
        parts = [*pattern.split("/"), ANY, ANY, ANY, ANY][:4]
        exporter, opset, device, shape = parts
        return cls(exporter, opset, None, reason=reason, device=device, shape=shape)

    @property
    def specificity(self) -> int:
        """How many of the cell fields it names exactly (no glob): the more, the more it wins."""
        return sum(not any(c in v for c in "*?[") for v in self.globs)

    @property
    def is_glob(self) -> bool:
        return self.specificity < len(self.globs)

    @property
    def globs(self) -> tuple[str, ...]:
        """The model's glob, the exporter's, then each axis's in the axes' order."""
        return (self.model, self.exporter, *(self.axes[a.key_column] for a in AXES))

    def selects(self, cell: Cell) -> bool:
        values = (cell.model, cell.exporter, *(a.glob_text(cell[a]) for a in AXES))
        return all(fnmatch.fnmatchcase(v, g) for v, g in zip(values, self.globs, strict=True))

    def expired(self, today: date) -> bool:
        return self.expires is not None and self.expires < today

    def explains(self, record: Record) -> bool:
        """The record ended as expected: the status (any failure for the legacy form), the
        stage where one is named, an error matching `match` where one is given."""
        if self.status is None:
            status_ok = not record.status.passing
        else:
            status_ok = record.status is self.status
        stage_ok = self.stage is None or record.stage is self.stage
        return status_ok and stage_ok and self._error_matches(record)

    def _error_matches(self, record: Record) -> bool:
        if self.match is None:
            return True
        text = "\n".join(t for t in (record.error_signature, record.error_message) if t)
        return re.search(self.match, text) is not None

    def describe(self) -> str:
        """'export_failed at translate matching "No ONNX function"', for messages."""
        what = "any failure" if self.status is None else str(self.status)
        if self.stage is not None:
            what += f" at {self.stage}"
        if self.match is not None:
            what += f" matching {self.match!r}"
        return what


def varied_axes(records: Iterable[Record]) -> set[str]:
    """The list axes whose value some record takes other than its default."""
    return {a.name for a in LIST_AXES for r in records if r.cell[a] != a.default}


def row_glob(axis: Axis[Any], cell: Cell, varied: set[str]) -> str:
    """What a row written from a run names of an axis: the cell's value; for a list axis
    whose expectations select any value unless named (the patch), `*` where the run never
    left its default, so that a file of such runs keeps the columns it had."""
    plain = axis in LIST_AXES and axis.any_by_default and axis.name not in varied
    return ANY if plain else axis.glob_text(cell[axis])


def _check_glob(axis: Axis[object], glob: str) -> None:
    """A glob without wildcards must name a value the axis knows (a misspelt one would
    select nothing, silently)."""
    if axis.known is None or any(c in glob for c in "*?["):
        return
    if glob not in axis.known():
        known = ", ".join(axis.known())
        raise ValueError(f"Expect {axis.key_column} {glob!r} must be one of {known} or a glob")


def normalize(entries: Iterable[Expect | tuple[str, str]]) -> tuple[Expect, ...]:
    """A zoo entry's `expect=`: `Expect`s, or legacy `(pattern, reason)` tuples."""
    return tuple(e if isinstance(e, Expect) else Expect.legacy(*e) for e in entries)


def for_model(expects: tuple[Expect, ...], model: str) -> tuple[Expect, ...]:
    """A zoo entry's expectations, bound to its own model name."""
    return tuple(e.with_(model=model) for e in expects)


def lookup(expects: tuple[Expect, ...], cell: Cell, today: date) -> Expect | None:
    """The expectation for a cell: the most specific (fewest globs) wins, then the first in
    order; expired ones do not count."""
    live = [e for e in expects if e.selects(cell) and not e.expired(today)]
    return max(live, key=lambda e: e.specificity, default=None)


def judge(record: Record, expects: tuple[Expect, ...], today: date | None = None) -> Record:
    """Apply a zoo entry's expectations, once, in the driver: a cell that fails as expected
    is `xfail`; one that passes is `xpass` (a fix shows up instead of hiding); one that
    fails differently keeps its status, and its `reason` names the expectation it missed."""
    if not record.status.ran or record.status.by_expectation:
        return record  # nothing ran, or judged already
    expect = lookup(expects, record.cell, today or date.today())
    if expect is None:
        return record
    if record.status is Status.OK:
        return record.with_changes(status=Status.XPASS, reason=expect.reason)
    if expect.explains(record):
        return record.with_changes(status=Status.XFAIL, reason=expect.reason)
    missed = f"expected {expect.describe()} ({expect.reason}); it failed differently"
    return record.with_changes(reason=missed)
