"""What the history keeps of a record: the cell's axes and what its readers take (status,
signature, export time and memory, graph fingerprint, each latency's statistics without
its samples), one column each.

The columns are derived from the declarations, never written beside them: a column is a key
of the `records.jsonl` line (harness.store.records) or a statistic of a `Latency`
(harness.store.measures), its SQL type and its reader follow from the key's declared type,
and a row reads back as a record line that `Record.from_dict` validates. The samples stay in
the run directory: a record of up to 200 KB keeps under 700 bytes here, 328 MiB for 90
nights of every nightly suite (benchmarks/test_history_store.py).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.store.axes import AXES
from harness.store.declare import hints
from harness.store.details import JsonObject
from harness.store.measures import Latency
from harness.store.records import SCHEMA, Cell, Record, line_declaration, upgrade

# The cell's own keys (model, exporter, family) and every axis of the matrix
# (harness.store.axes.AXES), one column each under the record's key, the SQL column named as
# the axis declares (`key_column`); a row written before an axis existed reads as the
# axis's default (None: every row has the value).
CELL_KEYS: tuple[tuple[str, object], ...] = (("model", None), ("exporter", None), ("family", ""))
AXIS_OF = {a.name: a for a in AXES}
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
    "export_peak_cuda_mb",
    "weights_mb",
    "exporter_speed",
    "graph_fingerprint",
    "ort_runtime",
    "artifacts",
    "metadata",
    "first_divergence",
    # the side by side of every way (harness.store.ways): graph figures, latency at the
    # named shapes (statistics only) and the token checks; null outside generative cells
    "onnx_bytes",
    "onnx_nodes",
    "shape_latency",
    "generation",
    "generations",
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
    column: str = ""  # the SQL column's name, where it is not the key's (an axis's)

    @property
    def name(self) -> str:
        return self.column or (self.key if self.stat is None else f"{self.key}.{self.stat}")

    @property
    def quoted(self) -> str:
        return f'"{self.name}"'

    @property
    def sql(self) -> str:
        return f"{self.quoted} {_SQL[self.kind]}"

    @property
    def wrong(self) -> str:
        """An SQL condition true where the column holds a value no writer stores: another
        type, a boolean other than 0 and 1, an infinite number, JSON that does not parse
        (SQLite reads a NaN back as NULL)."""
        c = self.quoted
        allowed = {"real": "'real', 'integer'", "int": "'integer'", "bool": "'integer'"}
        types = allowed.get(self.kind, "'text'")
        wrong = f"typeof({c}) NOT IN ({types}, 'null')"
        extra = {
            "real": f"abs({c}) > 1.7976931348623157e308",
            "bool": f"{c} NOT IN (0, 1)",
            "json": f"({c} IS NOT NULL AND NOT json_valid({c}))",
        }
        return f"({wrong} OR {extra[self.kind]})" if self.kind in extra else wrong


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
    own = tuple(Column(name, kind_of(line[name]), default=d) for name, d in CELL_KEYS)
    axes = tuple(
        Column(a.name, kind_of(a.kind), default=a.default, column=a.key_column) for a in AXES
    )
    kept = tuple(Column(key, kind_of(line[key])) for key in KEPT)
    latencies = tuple(
        Column(key, kind_of(stats[stat]), stat) for key in LATENCIES for stat in STATS
    )
    return own + axes + kept + latencies


COLUMNS = _columns()
CELL_COLUMNS = len(CELL_KEYS) + len(AXES)  # the first columns: the cell
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


def _without_samples(value: object) -> object:
    """A JSON value with every latency's samples left out (a named shape's latency)."""
    if isinstance(value, dict):
        return {k: [] if k == "samples" else _without_samples(v) for k, v in value.items()}
    return value


def _stored(column: Column, value: object) -> object:
    if column.kind == "json":
        kept = _without_samples(value)
        return json.dumps(kept, sort_keys=True, separators=(",", ":")) if kept else None
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


def summarize_line(line: JsonObject) -> Record:
    """A `records.jsonl` line (of any schema this harness reads) as the history keeps it,
    checked as a record is (SchemaError, Malformed): its samples are never validated nor
    kept, only read for the quartiles of a line written before they were."""
    upgraded = upgrade(dict(line))
    kept: dict[str, Any] = {k: upgraded[k] for k in ("schema", "run_id") if k in upgraded}
    kept |= {
        c.key: _without_samples(upgraded[c.key])
        for c in COLUMNS
        if c.stat is None and c.key in upgraded
    }
    for key in LATENCIES:
        if isinstance(upgraded.get(key), dict):
            stats = _latency_stats(upgraded[key])
            kept[key] = {"samples": [], **{s: stats.get(s) for s in STATS}}
    return Record.from_dict(kept)


# -- reading ---------------------------------------------------------------------------------


class BadValue(ValueError):
    """A value of the history that no writer of it stores (the database is untrusted)."""


def _read(column: Column, value: object) -> object:
    """A value of the column's kind (the database's reader checked it) as the line holds it."""
    if value is None:
        return column.default
    if column.kind == "json":
        return json.loads(str(value))
    return bool(value) if column.kind == "bool" else value


def line_of(run_id: str, columns: Sequence[Column], values: Iterable[object]) -> dict[str, Any]:
    """The record line a row of `columns` holds, its values of their columns' kinds; a
    latency reads as an object of its statistics."""
    line: dict[str, Any] = {"schema": SCHEMA, "run_id": run_id}
    for column, value in zip(columns, values, strict=True):
        found = _read(column, value)
        if column.stat is not None and (found is not None or column.key in line):
            # a latency is there where its p50 (the first statistic) is; its other
            # statistics are kept null (a p99 of too few samples)
            line.setdefault(column.key, {"samples": []})[column.stat] = found
        elif column.stat is None and (found is not None or column.default is not None):
            line[column.key] = found  # else a key the line leaves out
    return line


def record_of(line: Mapping[str, Any]) -> Record:
    """The record a full row holds: its latencies without samples (SchemaError, Malformed)."""
    return Record.from_dict(line)


def summarized(record: Record) -> Record:
    """The record as the history keeps it: what a write then a read give back."""
    return record_of(line_of(record.run_id, COLUMNS, row_of_record(record)))


def cell_of(values: Sequence[object]) -> Cell:
    """The cell of a row's first CELL_COLUMNS values (model, exporter, family, then each
    axis, of their columns' kinds): Cell checks each axis's value (ValueError)."""
    model, exporter, family, *axes = values
    if not isinstance(model, str) or not isinstance(exporter, str):
        raise BadValue(f"cell {model!r} {exporter!r}: not a model and an exporter")
    given = {
        a.name: a.default if v is None else bool(v) if a.kind is bool else a.coerce(v)
        for a, v in zip(AXES, axes, strict=True)
    }
    return Cell(model, exporter, family="" if family is None else str(family), **given)


def cell_of_line(line: Mapping[str, Any]) -> Cell:
    return cell_of([line.get(c.key) for c in COLUMNS[:CELL_COLUMNS]])
