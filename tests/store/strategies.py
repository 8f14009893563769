"""Hypothesis strategies derived from the store's declarations (harness.store.declare): a
value of each persisted type as the writer could produce it, field by field from its
declared type and the `Annotated` metadata pydantic builds its validators from: amounts within their bounds, statuses this harness knows, nested parts, keys
a newer writer added (`extra`)."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from hypothesis import strategies as st

from harness.store.axes import AXES
from harness.store.declare import As, Named, Rule, hints
from harness.store.details import Open
from harness.store.records import Cell

TEXT = st.text(max_size=6)
KEYS = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
FINITE = st.floats(-1e15, 1e15, allow_nan=False)
# JSON that a free-form object (`metadata`, `extra`) may hold: finite numbers only.
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | FINITE | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)

# The strategy of each rule a number field names, by the rule's words (declare.py).
RULES: dict[str, st.SearchStrategy[Any]] = {
    "0 or 1e-12 to 1e+12": st.just(0.0) | st.floats(1e-12, 1e12),
    "finite, >= 0": st.floats(0, 1e12),
    "finite": FINITE,
    "integer >= 1": st.integers(1, 2**31),
    "0 to 1": st.floats(0, 1),
}


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def strategy_of(hint: Any) -> st.SearchStrategy[Any]:
    """Values of type `hint` as the writer holds them."""
    extras: tuple[Any, ...] = ()
    if typing.get_origin(hint) is Annotated:
        hint, *more = typing.get_args(hint)
        extras = tuple(more)
    for extra in extras:
        if isinstance(extra, Rule):
            return RULES[extra.text]
        if isinstance(extra, Named):
            return st.sampled_from([e.value for e in extra.names])
        if isinstance(extra, As):  # kept as JSON: the declared type's own JSON object
            return strategy_of(extra.shape).map(lambda v: _as_json(v.to_dict()))
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = strategy_of(rest[0]) if len(rest) == 1 else JSON
        return st.none() | inner if type(None) in args else inner
    if origin is tuple and args:
        return st.lists(strategy_of(args[0]), max_size=3).map(tuple)
    if origin is list and args:
        return st.lists(strategy_of(args[0]), max_size=3)
    if origin in (dict, Mapping) and args:
        values = JSON if args[1] is Any else strategy_of(args[1])
        return st.dictionaries(KEYS, values, max_size=3)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return st.sampled_from(list(hint))
    if hint is Cell:
        return cells()
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return part(hint)
    simple = {str: TEXT, bool: st.booleans(), int: st.integers(0, 2**40), float: FINITE}
    return simple.get(hint, JSON)


def cells() -> st.SearchStrategy[Cell]:
    """A cell: a model, an exporter and a value of every axis, from the axes' declared types."""
    axes = {axis.name: strategy_of(axis.kind) for axis in AXES}
    return st.builds(Cell, TEXT, TEXT, family=TEXT, **axes)


def part(cls: type) -> st.SearchStrategy[Any]:
    """A declared dataclass, each field from its declared type; an `Open` part also holds
    keys a newer writer added."""
    declared = hints(cls)
    fields = {f.name: strategy_of(declared[f.name]) for f in dataclasses.fields(cls)}
    if issubclass(cls, Open):
        known = {f.name for f in dataclasses.fields(cls)}
        fields["extra"] = st.dictionaries(KEYS.filter(lambda k: k not in known), JSON, max_size=2)
    return st.builds(cls, **fields)
