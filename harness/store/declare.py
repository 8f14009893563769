"""Every persisted type is declared once, as a frozen dataclass whose field types say what
JSON may hold there: `Seconds` (an amount, in s), `Error` (a size of at least 0), `Count`,
an enum, a nested part. This module derives from those declarations what the store needs
of each type, so that no field is ever written out a second time:

- `check_of(type)`: the validator (`Malformed` names the field: 'numerics[0].max_abs');
- `reader_of(type)`: the codec's reader, JSON to the typed value (parts, tuples, enums);
- `rule_of(type)`: the rule's text and unit, for the reference docs (scripts/gen_docs.py).

The rules follow what the harness writes: strict JSON (no NaN or infinity), measured
amounts within what a clock or a counter can give, statuses and stages this harness knows.
A key a typed part does not know, and a free-form object (`metadata`), only needs finite
numbers: a newer harness may add a key without raising the schema, and the reader keeps it.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypeGuard

# A measured amount is 0 or within these bounds: no clock or counter of a cell gives less
# or more, and inside them a ratio of two amounts, its logarithm and its exponential stay
# finite (`harness compare` takes all three).
SMALLEST_AMOUNT = 1e-12
LARGEST_AMOUNT = 1e12

Check = Callable[[object, str], None]
Reader = Callable[[Any], Any]  # JSON as `json.loads` gives it -> the field's value


class SchemaError(ValueError):
    """A record or manifest that this version of the harness cannot read."""


class Malformed(SchemaError):
    """A record or manifest field whose value this harness never writes."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"field {where!r} {problem}" if where else problem)
        self.where = where


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def at(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


# -- the rules a field type names -----------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """What a number field may hold (`Annotated` metadata): its check, the rule in words
    and its unit, for the reference docs."""

    check: Check
    text: str
    unit: str | None = None


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _amount(value: object, where: str) -> None:
    ok = _number(value) and (value == 0 or SMALLEST_AMOUNT <= value <= LARGEST_AMOUNT)
    if not ok:
        raise Malformed(
            where,
            f"must be 0 or a number from {SMALLEST_AMOUNT:g} to {LARGEST_AMOUNT:g},"
            f" not {_shown(value)}",
        )


def _size(value: object, where: str) -> None:
    if not _number(value) or not math.isfinite(value) or value < 0:
        raise Malformed(where, f"must be a finite number of at least 0, not {_shown(value)}")


def _finite(value: object, where: str) -> None:
    if not _number(value) or not math.isfinite(value):
        raise Malformed(where, f"must be a finite number, not {_shown(value)}")


def amount(unit: str) -> Rule:
    """Seconds, milliseconds, MiB, a speedup: what a cell measured."""
    return Rule(_amount, f"0 or {SMALLEST_AMOUNT:g} to {LARGEST_AMOUNT:g}", unit)


def integer(minimum: int = 0) -> Check:
    def check(value: object, where: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise Malformed(where, f"must be an integer of at least {minimum}, not {_shown(value)}")

    return check


Seconds = Annotated[float, amount("s")]
Millis = Annotated[float, amount("ms")]
MiB = Annotated[float, amount("MiB")]
GiB = Annotated[float, amount("GB")]


def finite(unit: str | None = None) -> Rule:
    """A clock reading or a figure of where a cell ran: any finite number."""
    return Rule(_finite, "finite", unit)


# An error size or a tolerance: any finite number of at least 0.
Error = Annotated[float, Rule(_size, "finite, >= 0")]
# A ratio of two amounts (a speedup): any finite number of at least 0, since each amount
# may be as small or as large as an amount is (a property test found 2e12).
Ratio = Annotated[float, Rule(_size, "finite, >= 0", "x")]
# A clock reading (seconds since the epoch) or a figure of where a cell ran.
Clock = Annotated[float, finite("s since the epoch")]
Positive = Annotated[int, Rule(integer(1), "integer >= 1")]
Count = int  # an integer of at least 0


@dataclass(frozen=True)
class Named:
    """A string field that holds one of an enum's values (kept a plain string)."""

    names: type[enum.Enum]


@dataclass(frozen=True)
class As:
    """A JSON object kept as read, validated as `shape`'s (a type the store does not build,
    such as the run's options)."""

    shape: type


@dataclass(frozen=True)
class Requires:
    """Keys each item of a list of parts must hold here, beyond what its type requires."""

    keys: tuple[str, ...]


@dataclass(frozen=True)
class NullIsEmpty:
    """A collection that older writers left out or wrote null: it reads as empty."""


# -- checks ---------------------------------------------------------------------------------


def string(value: object, where: str) -> None:
    if not isinstance(value, str):
        raise Malformed(where, f"must be a string, not {_shown(value)}")


def boolean(value: object, where: str) -> None:
    if not isinstance(value, bool):
        raise Malformed(where, f"must be true or false, not {_shown(value)}")


def free(value: object, where: str) -> None:
    """Anything JSON holds, as long as its numbers are finite."""
    if isinstance(value, float) and not math.isfinite(value):
        raise Malformed(where, f"must be a finite number, not {_shown(value)}")
    if isinstance(value, Mapping):
        for key, item in value.items():
            free(item, at(where, str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            free(item, at(where, i))


def one_of(names: Iterable[str], what: str) -> Check:
    known = tuple(names)

    def check(value: object, where: str) -> None:
        if value not in known:
            raise Malformed(
                where, f"is an unknown {what} {_shown(value)} (known: {', '.join(known)})"
            )

    return check


def optional(check: Check) -> Check:
    def optional_check(value: object, where: str) -> None:
        if value is not None:
            check(value, where)

    _TAKES_NULL.add(optional_check)
    return optional_check


_TAKES_NULL: set[Check] = {free}  # the checks that accept null


def list_of(item: Check) -> Check:
    def check(value: object, where: str) -> None:
        if not isinstance(value, list):
            raise Malformed(where, f"must be a list, not {_shown(value)}")
        for i, entry in enumerate(value):
            item(entry, at(where, i))

    return check


def mapping_of(item: Check) -> Check:
    def check(value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise Malformed(where, f"must be an object, not {_shown(value)}")
        for key, entry in value.items():
            item(entry, at(where, key))

    return check


def obj(fields: Mapping[str, Check], *, required: Iterable[str] = ()) -> Check:
    """A JSON object whose known `fields` hold what their checks accept; other keys only
    need finite numbers."""
    needed = tuple(required)
    # Null is the commonest value (nothing measured): keys that take it are not checked.
    nullable = frozenset(key for key, c in fields.items() if c in _TAKES_NULL)

    def check(value: object, where: str) -> None:
        if not isinstance(value, dict):
            raise Malformed(where, f"must be an object, not {_shown(value)}")
        for key in needed:
            if key not in value:
                raise Malformed(at(where, key), "is missing")
        for key, entry in value.items():
            if entry is None and (key in nullable or key not in fields):
                continue
            fields.get(key, free)(entry, at(where, key))

    return check


# -- the derivation -------------------------------------------------------------------------


def _parts(hint: object) -> tuple[Any, tuple[Any, ...], tuple[Any, ...]]:
    """The hint without its `Annotated` metadata, its arguments, and the metadata."""
    extras: tuple[Any, ...] = ()
    if typing.get_origin(hint) is Annotated:
        hint, *more = typing.get_args(hint)
        extras = tuple(more)
    return hint, typing.get_args(hint), extras


def _without_none(args: tuple[object, ...]) -> list[object]:
    return [a for a in args if a is not type(None)]


def _is_union(hint: object) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def hints(cls: type) -> dict[str, object]:
    """A declaration's field types, `Annotated` metadata kept."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    return _HINTS[cls]


_HINTS: dict[type, dict[str, object]] = {}


def required_fields(cls: type) -> tuple[str, ...]:
    """The keys a JSON object of `cls` must hold: its fields without a default, unless null
    reads as empty there."""
    found = hints(cls)
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and not _null_is_empty(found[f.name])
    )


def field_names(cls: type) -> frozenset[str]:
    """The JSON keys a declaration knows (its fields, less an `Open` part's `extra`)."""
    if cls not in _NAMES:
        _NAMES[cls] = frozenset(f.name for f in dataclasses.fields(cls)) - {"extra"}
    return _NAMES[cls]


_NAMES: dict[type, frozenset[str]] = {}


@functools.cache
def check_of(hint: object) -> Check:
    """The validator of a value of type `hint`."""
    bare, args, extras = _parts(hint)
    for extra in extras:
        if isinstance(extra, Rule):
            return extra.check
        if isinstance(extra, As):
            return check_of(extra.shape | None)
        if isinstance(extra, Requires):
            (item,) = typing.get_args(bare)[:1]
            return optional(list_of(_part_check(item, extra.keys)))
        if isinstance(extra, Named):
            return one_of((e.value for e in extra.names), extra.names.__name__.lower())
        if isinstance(extra, NullIsEmpty):
            return optional(check_of(bare))
    if _is_union(bare):
        rest = _without_none(args)
        inner = check_of(rest[0]) if len(rest) == 1 else free
        return optional(inner) if type(None) in args else inner
    special = getattr(bare, "json_check", None)
    if callable(special):
        return typing.cast(Check, special)
    return _plain_check(bare, args)


def _plain_check(bare: Any, args: tuple[object, ...]) -> Check:
    origin = typing.get_origin(bare) or bare
    if origin in (tuple, list) and args:
        return list_of(check_of(args[0]))
    if origin in (dict, Mapping) and args:
        return mapping_of(check_of(args[1]))
    if isinstance(bare, type) and issubclass(bare, enum.Enum):
        return one_of((e.value for e in bare), bare.__name__.lower())
    if dataclasses.is_dataclass(bare) and isinstance(bare, type):
        return _part_check(bare)
    simple: dict[Any, Check] = {str: string, bool: boolean, int: integer(), float: _finite}
    return simple.get(bare, free)


def _part_check(cls: type, required: tuple[str, ...] = ()) -> Check:
    return obj(
        {name: check_of(hints(cls)[name]) for name in sorted(field_names(cls))},
        required=(*required_fields(cls), *required),
    )


def _identity(value: Any) -> Any:
    return value


@functools.cache
def reader_of(hint: object) -> Reader:
    """How to read a JSON value into a value of type `hint` (JSON as is where it already
    is one: strings, numbers, free-form objects)."""
    bare, args, extras = _parts(hint)
    if any(isinstance(m, NullIsEmpty) for m in extras):
        inner, origin = reader_of(bare), typing.get_origin(bare) or bare
        empty: object = {} if origin in (dict, Mapping) else [] if origin is list else ()
        return lambda value: inner(empty if value is None else value)
    if any(isinstance(m, As) for m in extras):
        return _identity
    if _is_union(bare):
        rest = _without_none(args)
        if len(rest) != 1 or (inner := reader_of(rest[0])) is _identity:
            return _identity
        return lambda value: None if value is None else inner(value)
    origin = typing.get_origin(bare) or bare
    if origin is tuple and args:
        item = reader_of(args[0])
        return lambda value: tuple(map(item, value))
    if origin is list and args and (item := reader_of(args[0])) is not _identity:
        return lambda value: [item(v) for v in value]
    if origin in (dict, Mapping) and args and (item := reader_of(args[1])) is not _identity:
        return lambda value: {k: item(v) for k, v in value.items()}
    if dataclasses.is_dataclass(bare) and isinstance(bare, type):
        return typing.cast(Reader, bare.from_dict)  # type: ignore[attr-defined]
    return _identity


@functools.cache
def field_readers(cls: type) -> tuple[tuple[str, Reader, bool], ...]:
    """The fields of `cls` whose JSON value must be read into a typed one, how, and whether
    an absent key reads as empty there."""
    found = hints(cls)
    readers = (
        (f.name, reader_of(found[f.name]), _null_is_empty(found[f.name]))
        for f in dataclasses.fields(cls)
        if f.name != "extra"
    )
    return tuple(entry for entry in readers if entry[1] is not _identity)


def _null_is_empty(hint: object) -> bool:
    return any(isinstance(m, NullIsEmpty) for m in _parts(hint)[2])


def rule_of(hint: object) -> Rule | None:
    """The number rule a field type names (for the docs), if any."""
    bare, args, extras = _parts(hint)
    for extra in extras:
        if isinstance(extra, Rule):
            return extra
    if _is_union(bare) and len(rest := _without_none(args)) == 1:
        return rule_of(rest[0])
    if (typing.get_origin(bare) or bare) in (dict, Mapping, tuple, list) and args:
        return rule_of(args[-1] if typing.get_origin(bare) in (dict, Mapping) else args[0])
    return None


def build(cls: type, d: Mapping[str, Any]) -> Any:
    """A declared dataclass from its JSON object (checked, or trusted): each known key read
    into its field's type; absent keys take the field's default."""
    return cls(**typed_values(cls, d))


def typed_values(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor arguments of `cls` that JSON object `d` holds (its known keys)."""
    names = field_names(cls)
    values = {k: v for k, v in d.items() if k in names}
    for name, read, empty_if_absent in field_readers(cls):
        if name in values:
            values[name] = read(values[name])
        elif empty_if_absent:
            values[name] = read(None)
    return values
