"""The grid every table and plot of a run shares.

Rows are (model, shape), columns exporter@opset (with device, dtype, ORT optimisation,
variant and patch where a run has several), exporters in the registry's order (harness.exporters).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.exporters import NAMES as EXPORTERS
from harness.store.records import NO_PATCH, Dtype, OrtOpt, Record

# == the grid ==================================================================================

RowKey = tuple[str, bool]  # (model, dynamic)


@dataclass(frozen=True)
class Column:
    exporter: str
    opset: int
    device: str = "cpu"
    variant: str = "base"
    patch: str = NO_PATCH
    dtype: Dtype = Dtype.FLOAT32
    ort_opt: OrtOpt = OrtOpt.DEFAULT


def _exporter_rank(exporter: str) -> int:
    return EXPORTERS.index(exporter) if exporter in EXPORTERS else len(EXPORTERS)


def _column_order(c: Column) -> tuple[Any, ...]:
    return (
        _exporter_rank(c.exporter),
        c.exporter,
        c.device,
        list(Dtype).index(c.dtype),
        list(OrtOpt).index(c.ort_opt),
        c.opset,
        c.variant != "base",
        c.variant,
        c.patch != NO_PATCH,
        c.patch,
    )


@dataclass(frozen=True, eq=False)
class Layout:
    """Rows (model, shape) x columns (exporter@opset [device] [dtype] [variant] [patch]) of
    a run. Device, dtype, variant and patch appear in labels only when the run has more
    than one of them.
    """

    rows: tuple[RowKey, ...]
    columns: tuple[Column, ...]
    cells: Mapping[tuple[RowKey, Column], Record]
    show_device: bool
    show_variant: bool
    show_patch: bool = False
    show_dtype: bool = False
    show_ort_opt: bool = False

    def record(self, row: RowKey, column: Column) -> Record | None:
        return self.cells.get((row, column))

    def row_records(self, row: RowKey) -> list[Record]:
        """The row's records, column by column (absent cells left out)."""
        return [r for c in self.columns if (r := self.record(row, c)) is not None]

    def in_order(self) -> list[Record]:
        """The records row by row (model, shape), then column by column (exporter@opset)."""
        return [r for row in self.rows for r in self.row_records(row)]

    def row_label(self, row: RowKey) -> str:
        return f"{row[0]} (dynamic)" if row[1] else row[0]

    def column_label(self, column: Column) -> str:
        return self._suffixed(f"{column.exporter}@{column.opset}", column)

    def series_label(self, column: Column) -> str:
        """The exporter (with device/variant where shown): a series across opsets."""
        return self._suffixed(column.exporter, column)

    def _suffixed(self, text: str, column: Column) -> str:
        if self.show_device:
            text += f" {column.device}"
        if self.show_dtype:
            text += f" {column.dtype}"
        if self.show_ort_opt:
            text += f" [ort {column.ort_opt}]"
        if self.show_variant and column.variant != "base":
            text += f" [{column.variant}]"
        if self.show_patch and column.patch != NO_PATCH:
            text += f" [patch {column.patch}]"
        return text

    def series(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.series_label(c) for c in self.columns))


def row_key(record: Record) -> RowKey:
    return (record.model, record.dynamic)


def column_of(record: Record) -> Column:
    r = record
    return Column(r.exporter, r.opset, r.device, r.variant, r.patch, r.dtype, r.ort_opt)


def layout(records: Iterable[Record]) -> Layout:
    """The grid of a run; a cell recorded twice (a retry) keeps its last record."""
    cells = {(row_key(r), column_of(r)): r for r in records}
    rows = tuple(sorted({row for row, _ in cells}))
    columns = tuple(sorted({col for _, col in cells}, key=_column_order))
    return Layout(
        rows=rows,
        columns=columns,
        cells=cells,
        show_device=len({c.device for c in columns}) > 1,
        show_variant=len({c.variant for c in columns}) > 1,
        show_patch=len({c.patch for c in columns}) > 1,
        show_dtype=len({c.dtype for c in columns}) > 1,
        show_ort_opt=len({c.ort_opt for c in columns}) > 1,
    )


def unique_cells(records: Iterable[Record]) -> list[Record]:
    """One record per cell (the last one, should a resumed run have written two)."""
    return list(layout(records).cells.values())
