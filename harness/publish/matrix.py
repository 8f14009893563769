"""The suite page's matrix (pure): one row per model, one column per exporter, and in each
matrix cell the sub-cells of the other axes (opset, device, shapes, dtype, task, variant,
patch, ORT optimisation), named only by the axes that vary within the suite."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.publish.read import CellResult
from harness.store.records import NO_PATCH, OrtOpt


def axes(r: CellResult) -> dict[str, str]:
    """A record's axes other than model and exporter, in the order a sub-cell names them."""
    return {
        "opset": f"@{r.cell.opset}",
        "device": r.cell.device,
        "shapes": "dynamic" if r.cell.dynamic else "static",
        "dtype": r.dtype,
        "task": r.task,
        "variant": "" if r.cell.variant == "base" else r.cell.variant,
        "patch": "" if r.cell.patch == NO_PATCH else f"patch {r.cell.patch}",
        "ort": "" if r.cell.ort_opt is OrtOpt.DEFAULT else f"ort {r.cell.ort_opt}",
    }


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
