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
from dataclasses import dataclass, field, replace
from datetime import date

from harness.store.records import Cell, Dtype, OrtOpt, Record
from harness.store.status import Stage, Status

ANY = "*"
DEFAULT_DTYPE, DEFAULT_ORT_OPT = Dtype.FLOAT32.value, OrtOpt.DEFAULT.value


@dataclass(frozen=True)
class Expect:
    """Cells matching the globs are expected to end in `status` (at `stage`, with an error
    matching `match`), for `reason`, until `expires`.

    `status=None` is the legacy form `(match, reason)` of zoo entries: any failure."""

    exporter: str = ANY
    opset: str = ANY
    status: Status | None = Status.EXPORT_FAILED
    stage: Stage | None = None
    match: str | None = None  # a regular expression searched in the error
    reason: str = ""
    expires: date | None = None
    model: str = ANY
    device: str = ANY
    shape: str = ANY  # static | dynamic | *
    variant: str = ANY
    source: str = field(default="", compare=False)  # where it is written (file:line)
    patch: str = ANY  # the export-time patch (`none`: the plain call)
    # The dtype and ORT optimisation axes: an expectation is about the cells it was written
    # for, the model's own float32 under a default session, unless it says otherwise (`*`
    # for every one); a float32 failure must not make a float16 cell's failure look expected.
    dtype: str = DEFAULT_DTYPE
    ort_opt: str = DEFAULT_ORT_OPT

    def __post_init__(self) -> None:
        object.__setattr__(self, "opset", str(self.opset))
        if self.status is not None:
            object.__setattr__(self, "status", Status.of(self.status))
        if self.stage is not None:
            object.__setattr__(self, "stage", Stage(self.stage))
        if self.match is not None:
            re.compile(self.match)  # a bad pattern fails where it is written
        if self.shape not in (ANY, "static", "dynamic"):
            raise ValueError(f"Expect shape {self.shape!r} must be static, dynamic or *")

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
        return (
            self.model,
            self.exporter,
            self.opset,
            self.device,
            self.shape,
            self.variant,
            self.patch,
            self.dtype,
            self.ort_opt,
        )

    def selects(self, cell: Cell) -> bool:
        values = (
            cell.model,
            cell.exporter,
            str(cell.opset),
            cell.device,
            _shape(cell),
            cell.variant,
            cell.patch,
            cell.dtype.value,
            cell.ort_opt.value,
        )
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


def _shape(cell: Cell) -> str:
    return "dynamic" if cell.dynamic else "static"


def normalize(entries: Iterable[Expect | tuple[str, str]]) -> tuple[Expect, ...]:
    """A zoo entry's `expect=`: `Expect`s, or legacy `(pattern, reason)` tuples."""
    return tuple(e if isinstance(e, Expect) else Expect.legacy(*e) for e in entries)


def for_model(expects: tuple[Expect, ...], model: str) -> tuple[Expect, ...]:
    """A zoo entry's expectations, bound to its own model name."""
    return tuple(replace(e, model=model) for e in expects)


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
