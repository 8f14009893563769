"""The suite page's matrix (pure): one row per model, one column per exporter, and in each
matrix cell the sub-cells of the other axes (opset, device, shapes, dtype, task, variant,
patch, ORT optimisation), named only by the axes that vary within the suite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.publish.read import CellResult
from harness.store.axes import DTYPE, DYNAMIC, Axis, label_order


def axes(r: CellResult) -> dict[str, str]:
    """A record's axes other than model and exporter (harness.store.axes, in the cell
    label's order), then its task, as a sub-cell names them; the dtype is the record's own
    (an OpInfo cell's sample dtype where its metadata says one)."""
    named = {a.name: _text(a, r.cell[a]) for a in label_order()}
    return {**named, DTYPE.name: r.dtype, "task": r.task}


def _text(axis: Axis[Any], value: object) -> str:
    """'@18', 'cpu', 'patch p', 'ort fusions': the label's fragment without brackets ("" at
    the default); the shapes name both, 'static' and 'dynamic'."""
    text = axis.column_text(value) if axis is DYNAMIC else axis.label_part(value)
    return text.strip().removeprefix("[").removesuffix("]")


@dataclass(frozen=True)
class SubCell:
    result: CellResult
    name: str  # the varying axes' values ("@18 dynamic"); "" when nothing varies
    since: str  # the night its status began
    other: str | None  # the other channel's status where it differs


@dataclass(frozen=True)
class Row:
    model: str
    family: str
    by_exporter: dict[str, list[SubCell]]


@dataclass(frozen=True)
class SuiteMatrix:
    exporters: list[str]
    common: dict[str, str]  # axis -> the value every cell shares (stated once, above)
    rows: list[Row]

    @property
    def cells(self) -> int:
        return sum(len(s) for row in self.rows for s in row.by_exporter.values())


def suite_matrix(
    records: Sequence[CellResult],
    since: Mapping[str, str],
    other: Mapping[str, CellResult],
) -> SuiteMatrix:
    """The newest night's records of one suite as a model x exporter matrix; `since`:
    cell -> night its status began; `other`: the other channel's newest cells."""
    found = [axes(r) for r in records]
    names = list(found[0]) if found else []
    values = {a: {f[a] for f in found} for a in names}
    varying = [a for a in names if len(values[a]) > 1]
    common = {a: next(iter(v)) for a, v in values.items() if len(v) == 1 and next(iter(v))}
    rows: dict[str, Row] = {}
    for r, ax in sorted(zip(records, found, strict=True), key=lambda x: x[0].cell.label()):
        label = r.cell.label()
        twin = other.get(label)
        sub = SubCell(
            result=r,
            name=" ".join(ax[a] for a in varying if ax[a]),
            since=since.get(label, ""),
            other=str(twin.status) if twin is not None and twin.status != r.status else None,
        )
        row = rows.setdefault(r.cell.model, Row(r.cell.model, r.cell.family, {}))
        row.by_exporter.setdefault(r.cell.exporter, []).append(sub)
    exporters = sorted({r.cell.exporter for r in records})
    return SuiteMatrix(exporters, common, [rows[m] for m in sorted(rows)])
