"""What the history keeps of a record: the cell's axes and what its readers take (status,
signature, export time and memory, graph fingerprint, each latency's statistics without
its samples), one column each.

The columns are derived from the declarations, never written beside them: a column is a key
of the `records.jsonl` line (harness.store.records) or a statistic of a `Latency`
(harness.store.measures), its SQL type and its reader follow from the key's declared type,
and a row reads back as a record line that `Record.from_dict` validates. The samples stay in
the run directory: a record of 129 KB keeps about 400 bytes here
(benchmarks/test_history_store.py).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.store.declare import hints
from harness.store.details import JsonObject
from harness.store.measures import Latency
from harness.store.records import SCHEMA, Cell, Record, line_declaration

# The cell's axes, one column each, under Record.to_dict()'s cell keys, with the value a row
# written before the axis existed reads as (None: every row has it). The one line to swap
# for harness.store.axes.AXES.
AXES: tuple[tuple[str, object], ...] = tuple(
    (f.name, None if f.default is dataclasses.MISSING else f.default)
    for f in dataclasses.fields(Cell)
)
# The record's own keys the history keeps: what `compare --history`, the trends and the
# site read. Not kept: error messages (up to 4 000 characters), op tables, numerics,
# timings of the cell's other stages: the run directory has them.
KEPT = (
    "status",
    "stage",
    "error_type",
    "error_signature",
    "opset_actual",
    "export_s",
    "export_peak_rss_mb",
    "graph_fingerprint",
    "ort_runtime",
    "artifacts",
    "metadata",
    "first_divergence",
)
# Latencies kept as their statistics (every field of `Latency` but its samples).
LATENCIES = ("ort_latency_ms", "eager_latency_ms")
STATS = tuple(f.name for f in dataclasses.fields(Latency) if f.name != "samples")

_SQL = {"text": "TEXT", "int": "INTEGER", "real": "REAL", "bool": "INTEGER", "json": "TEXT"}


@dataclass(frozen=True)
class Column:
    """One column: a key of the record line (`key`), or a statistic of one (`stat`)."""

    key: str
    kind: str  # text, int, real, bool or json (an object, kept as its JSON text)
    stat: str | None = None
    default: object = None  # what NULL reads as

    @property
    def name(self) -> str:
        return self.key if self.stat is None else f"{self.key}.{self.stat}"

    @property
    def quoted(self) -> str:
        return f'"{self.name}"'

    @property
    def sql(self) -> str:
        return f"{self.quoted} {_SQL[self.kind]}"


def _bare(hint: Any) -> Any:
    """The type inside `Required[...]`, `Annotated[...]` and `X | None`."""
    while typing.get_origin(hint) in (typing.Required, typing.NotRequired, typing.Annotated):
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        return _bare(rest[0]) if len(rest) == 1 else hint
    return hint


def kind_of(hint: Any) -> str:
    """The column kind of a declared type."""
    bare = _bare(hint)
    if bare is bool:
        return "bool"
    if bare is int:
        return "int"
    if bare is float:
        return "real"
    if isinstance(bare, type) and issubclass(bare, str | enum.Enum):
        return "text"
    return "json"


def _columns() -> tuple[Column, ...]:
    line, stats = line_declaration(), hints(Latency)
    axes = tuple(Column(name, kind_of(line[name]), default=d) for name, d in AXES)
    kept = tuple(Column(key, kind_of(line[key])) for key in KEPT)
    latencies = tuple(
        Column(key, kind_of(stats[stat]), stat) for key in LATENCIES for stat in STATS
    )
    return axes + kept + latencies


COLUMNS = _columns()
BY_NAME = {c.name: c for c in COLUMNS}


# -- writing --------------------------------------------------------------------------------


def _latency_stats(value: object) -> Mapping[str, object]:
    """A line's latency object as its statistics; the quartiles of a record written before
    they were, from its samples."""
    if not isinstance(value, dict):
        return {}
    samples = value.get("samples") or ()
    found = dict(value)
    for q in (25, 75):
        if found.get(f"p{q}") is None and samples:
            from harness.stats import percentile  # scipy: only for an older line

            found[f"p{q}"] = percentile(samples, q)
    return found


def _stored(column: Column, value: object) -> object:
    if column.kind == "json":
        return json.dumps(value, sort_keys=True, separators=(",", ":")) if value else None
    if column.kind == "bool" and value is not None:
        return int(bool(value))
    return value.value if isinstance(value, enum.Enum) else value


def row_of(line: JsonObject) -> tuple[object, ...]:
    """The columns' values of a record line (`Record.to_dict()`, or an older line upgraded)."""
    latencies = {key: _latency_stats(line.get(key)) for key in LATENCIES}
    return tuple(
        _stored(c, line.get(c.key) if c.stat is None else latencies[c.key].get(c.stat))
        for c in COLUMNS
    )


def row_of_record(record: Record) -> tuple[object, ...]:
    return row_of(record.to_dict())


# -- reading ---------------------------------------------------------------------------------


class BadValue(ValueError):
    """A value of the history that no writer of it stores (the database is untrusted)."""


def _read(column: Column, value: object) -> object:
    kind = column.kind
    if value is None:
        return column.default
    if kind == "real" and type(value) is float and math.isfinite(value):
        return value  # the common case first: millions of values a site
    if kind == "real" and type(value) is int:
        return float(value)
    if kind == "text" and type(value) is str or kind == "int" and type(value) is int:
        return value
    if kind == "bool" and value in (0, 1) and type(value) is int:
        return bool(value)
    if kind == "json" and type(value) is str:
        try:
            return json.loads(value)
        except ValueError:
            pass
    raise BadValue(f"column {column.name!r} holds {value!r:.60}, not a {kind} value")


def line_of(run_id: str, columns: Sequence[Column], values: Iterable[object]) -> dict[str, Any]:
    """The record line a row of `columns` holds (BadValue names a column of a value no
    writer stores); a latency reads as an object of its statistics."""
    line: dict[str, Any] = {"schema": SCHEMA, "run_id": run_id}
    for column, value in zip(columns, values, strict=True):
        found = _read(column, value)
        if found is None and column.default is None:
            continue  # a key the line leaves out
        if column.stat is None:
            line[column.key] = found
        else:
            line.setdefault(column.key, {"samples": []})[column.stat] = found
    return line


def record_of(line: Mapping[str, Any]) -> Record:
    """The record a full row holds: its latencies without samples (SchemaError, Malformed)."""
    return Record.from_dict(line)


def summarized(record: Record) -> Record:
    """The record as the history keeps it: what a write then a read give back."""
    return record_of(line_of(record.run_id, COLUMNS, row_of_record(record)))


def cell_of(line: Mapping[str, Any]) -> Cell:
    """The cell of a line read by `line_of` (whose axes have their columns' kinds): an axis
    of an enum reads as its member (ValueError for an unknown one)."""
    values: dict[str, Any] = {}
    for name, default in AXES:
        value = line.get(name)
        if value is None:
            raise BadValue(f"column {name!r} is empty: every cell has one")
        values[name] = type(default)(value) if isinstance(default, enum.Enum) else value
    return Cell(**values)
