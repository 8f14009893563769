"""The grid every table and plot of a run shares.

Rows are (model, shape), columns exporter@opset (with device, dtype, ORT optimisation,
variant and patch where a run has several), exporters in the registry's order (harness.exporters).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.exporters import NAMES as EXPORTERS
from harness.store.axes import OPSET, Axis, column_order, value_rank
from harness.store.records import Record

V = TypeVar("V")

# == the grid ==================================================================================

RowKey = tuple[str, bool]  # (model, dynamic)


_COLUMN_AXES = column_order()  # device, dtype, ORT optimisation, opset, variant, patch


@dataclass(frozen=True)
class Column:
    """An exporter and the values of the axes a column holds (`_COLUMN_AXES`: every axis
    but the shapes, which the rows hold)."""

    exporter: str
    values: tuple[Any, ...]

    def __getitem__(self, axis: Axis[V]) -> V:
        value: V = self.values[_COLUMN_AXES.index(axis)]
        return value

    @property
    def opset(self) -> int:
        return self[OPSET]


def _exporter_rank(exporter: str) -> int:
    return EXPORTERS.index(exporter) if exporter in EXPORTERS else len(EXPORTERS)


def _column_order(c: Column) -> tuple[Any, ...]:
    ranks = (value_rank(a, v) for a, v in zip(_COLUMN_AXES, c.values, strict=True))
    return (_exporter_rank(c.exporter), c.exporter, *ranks)


@dataclass(frozen=True, eq=False)
class Layout:
    """Rows (model, shape) x columns (exporter@opset and the other axes) of a run. An axis
    appears in the labels only when the run has more than one of its values.
    """

    rows: tuple[RowKey, ...]
    columns: tuple[Column, ...]
    cells: Mapping[tuple[RowKey, Column], Record]
    shown: frozenset[str] = frozenset()  # the axes whose values differ between columns

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
        """`text` with the values of the axes the run varies (the opset is the caller's)."""
        for axis in _COLUMN_AXES:
            if axis is not OPSET and axis.name in self.shown:
                text += axis.column_text(column[axis])
        return text

    def series(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.series_label(c) for c in self.columns))


def row_key(record: Record) -> RowKey:
    return (record.model, record.dynamic)


def column_of(record: Record) -> Column:
    return Column(record.exporter, tuple(record.cell[a] for a in _COLUMN_AXES))


def layout(records: Iterable[Record]) -> Layout:
    """The grid of a run; a cell recorded twice (a retry) keeps its last record."""
    cells = {(row_key(r), column_of(r)): r for r in records}
    rows = tuple(sorted({row for row, _ in cells}))
    columns = tuple(sorted({col for _, col in cells}, key=_column_order))
    shown = frozenset(a.name for a in _COLUMN_AXES if len({c[a] for c in columns}) > 1)
    return Layout(rows=rows, columns=columns, cells=cells, shown=shown)


def unique_cells(records: Iterable[Record]) -> list[Record]:
    """One record per cell (the last one, should a resumed run have written two)."""
    return list(layout(records).cells.values())
