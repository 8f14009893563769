"""Every persisted type is declared once, as a frozen dataclass whose field types say what
JSON may hold there: `Seconds` (an amount, in s), `Error` (a size of at least 0), `Count`,
an enum, a nested part. Pydantic (v2) derives the validator and the reader of each type
from those declarations (`read`: one `SchemaValidator` per type, built once); this module
adds what pydantic does not do:

- the rules of the harness's own number types, as `Annotated` metadata that pydantic
  builds into its schema (`Rule`, `Named`, `As`, `Requires`, `NullIsEmpty`), with their
  words and units for the reference docs (`rule_of`, scripts/gen_docs.py);
- JSON's strictness: a number is no string and no boolean, an integer is at least 0, a
  free-form value (`metadata`, `extra`) holds finite numbers only;
- pydantic's errors as the store's one line (`Malformed` names the field:
  'numerics[0].max_abs').

The rules follow what the harness writes: strict JSON (no NaN or infinity), measured
amounts within what a clock or a counter can give, statuses and stages this harness knows.
A key a typed part does not know, and a free-form object (`metadata`), only needs finite
numbers: a newer harness may add a key without raising the schema, and the reader keeps it.
The types stay plain dataclasses: code builds them without validating (a cell's hot path),
and the store validates what it reads.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import GetCoreSchemaHandler, TypeAdapter, ValidationError
from pydantic_core import CoreSchema, PydanticCustomError, SchemaValidator
from pydantic_core import core_schema as cs

# A measured amount is 0 or within these bounds: no clock or counter of a cell gives less
# or more, and inside them a ratio of two amounts, its logarithm and its exponential stay
# finite (`harness compare` takes all three).
SMALLEST_AMOUNT = 1e-12
LARGEST_AMOUNT = 1e12

Check = Callable[[object, str], None]


class SchemaError(ValueError):
    """A record or manifest that this version of the harness cannot read."""


class Malformed(SchemaError):
    """A record or manifest field whose value this harness never writes."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"field {where!r} {problem}" if where else problem)
        self.where = where
        self.problem = problem


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def at(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _refused(problem: str, schema: CoreSchema) -> CoreSchema:
    """`schema` whose every error is `problem` ('{shown}': the value)."""
    return cs.custom_error_schema(
        schema, "harness", custom_error_message=problem, custom_error_context={"problem": problem}
    )


# -- the rules a field type names -----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Rule:
    """What a number field may hold (`Annotated` metadata): its pydantic schema, what a
    value that breaks it is told, the rule in words and its unit, for the reference docs."""

    schema: CoreSchema = field(repr=False)
    problem: str
    text: str
    unit: str | None = None

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return _refused(f"{self.problem}, not {{shown}}", self.schema)


def _finite_float(**bounds: float) -> CoreSchema:
    """A finite number within `bounds`; an integer stays one (JSON's `5` is read back, and
    written back, as `5`)."""
    whole = {k: math.ceil(v) if k == "ge" else math.floor(v) for k, v in bounds.items()}
    return cs.union_schema(
        [
            cs.int_schema(strict=True, **whole),  # type: ignore[arg-type]
            cs.float_schema(strict=True, allow_inf_nan=False, **bounds),  # type: ignore[arg-type]
        ]
    )


def amount(unit: str) -> Rule:
    """Seconds, milliseconds, MiB, a speedup: what a cell measured."""
    return Rule(
        cs.union_schema(
            [_finite_float(ge=0, le=0), _finite_float(ge=SMALLEST_AMOUNT, le=LARGEST_AMOUNT)]
        ),
        f"must be 0 or a number from {SMALLEST_AMOUNT:g} to {LARGEST_AMOUNT:g}",
        f"0 or {SMALLEST_AMOUNT:g} to {LARGEST_AMOUNT:g}",
        unit,
    )


Seconds = Annotated[float, amount("s")]
Millis = Annotated[float, amount("ms")]
MiB = Annotated[float, amount("MiB")]
GiB = Annotated[float, amount("GB")]


def finite(unit: str | None = None) -> Rule:
    """A clock reading or a figure of where a cell ran: any finite number."""
    return Rule(_finite_float(), "must be a finite number", "finite", unit)


def _size(unit: str | None = None) -> Rule:
    return Rule(_finite_float(ge=0), "must be a finite number of at least 0", "finite, >= 0", unit)


# An error size or a tolerance: any finite number of at least 0.
Error = Annotated[float, _size()]
# A ratio of two amounts (a speedup): any finite number of at least 0, since each amount
# may be as small or as large as an amount is (a property test found 2e12).
Ratio = Annotated[float, _size("x")]
# A spread of amounts (a standard deviation): any finite number of at least 0. Identical
# samples give a rounding residue, not 0 (three of 683.33 ms: 1.4e-13 by harness.stats),
# below the smallest amount; a property test of the comparison found it.
Spread = Annotated[float, _size("ms")]
# A share of elements (a mismatch fraction): from 0 to 1.
Fraction = Annotated[
    float,
    Rule(_finite_float(ge=0, le=1), "must be a number from 0 to 1", "0 to 1"),
]
# A clock reading (seconds since the epoch) or a figure of where a cell ran.
Clock = Annotated[float, finite("s since the epoch")]
Positive = Annotated[
    int, Rule(cs.int_schema(strict=True, ge=1), "must be an integer of at least 1", "integer >= 1")
]
Count = int  # an integer of at least 0


def _unknown(names: type[enum.Enum], schema: CoreSchema) -> CoreSchema:
    known = ", ".join(str(e.value) for e in names)
    return _refused(f"is an unknown {names.__name__.lower()} {{shown}} (known: {known})", schema)


@dataclass(frozen=True)
class Named:
    """A string field that holds one of an enum's values (kept a plain string)."""

    names: type[enum.Enum]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return _unknown(self.names, cs.literal_schema([e.value for e in self.names]))


@dataclass(frozen=True)
class As:
    """A JSON object kept as read, validated as `shape`'s (a type the store does not build,
    such as the run's options)."""

    shape: type

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        names = {f.name for f in dataclasses.fields(self.shape)}

        def kept(value: Any, validate: cs.ValidatorFunctionWrapHandler) -> Any:
            validate(value)
            for key in [k for k in value if k not in names]:  # a newer writer's: finite
                _free(value[key], key)
            return value

        return cs.no_info_wrap_validator_function(kept, handler.generate_schema(self.shape))


@dataclass(frozen=True)
class Requires:
    """Keys each item of a list of parts must hold here, beyond what its type requires."""

    keys: tuple[str, ...]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        def required(value: Any) -> Any:
            for i, item in enumerate(value if isinstance(value, list) else ()):
                for key in self.keys:
                    if isinstance(item, dict) and key not in item:
                        raise _error("is missing", at(f"[{i}]", key))
            return value

        return cs.no_info_before_validator_function(required, handler(source))


@dataclass(frozen=True)
class NullIsEmpty:
    """A collection that older writers left out or wrote null: it reads as empty."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> Any:
        origin = typing.get_origin(source) or source
        empty: object = {} if origin in (dict, Mapping) else [] if origin is list else ()
        return cs.no_info_before_validator_function(
            lambda value: empty if value is None else value, handler(source)
        )


def _error(problem: str, suffix: str = "") -> PydanticCustomError:
    return PydanticCustomError("harness", problem, {"problem": problem, "suffix": suffix})


# -- free-form JSON ---------------------------------------------------------------------------


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


def _free(value: Any, where: str = "") -> Any:
    try:
        free(value, where)
    except Malformed as exc:
        raise _error(exc.problem, exc.where) from None
    return value


# -- the validators -------------------------------------------------------------------------

_SCALARS = {"int", "float", "bool", "str"}
_NOT_SCHEMAS = {"metadata", "custom_error_context", "config", "serialization", "default"}


def _as_json(node: Any) -> Any:
    """Pydantic's schema made as strict as JSON: a number is no string and no boolean, an
    integer is at least 0, a float finite; an enum names its values; `Any` only finite."""
    if isinstance(node, list):
        return [_as_json(item) for item in node]
    if not isinstance(node, dict):
        return node
    kind = node.get("type")
    if kind == "any":
        return cs.no_info_plain_validator_function(_free)
    # a schema's own keys (not a mapping of field names, where `metadata` is a field)
    skipped = _NOT_SCHEMAS if isinstance(kind, str) else ()
    out = {k: v if k in skipped else _as_json(v) for k, v in node.items()}
    if kind in _SCALARS:
        out.setdefault("strict", True)
    if kind == "int":
        out.setdefault("ge", 0)
    if kind == "float":
        out.setdefault("allow_inf_nan", False)
    if kind == "enum":
        return _unknown(node["cls"], typing.cast(CoreSchema, out))
    return out


@functools.cache
def validator_of(hint: object) -> SchemaValidator:
    """Pydantic's validator and reader of type `hint`, built once."""
    return SchemaValidator(_as_json(TypeAdapter(typing.cast(Any, hint)).core_schema))


_PROBLEMS = {
    "missing": "is missing",
    "string_type": "must be a string, not {shown}",
    "bool_type": "must be true or false, not {shown}",
    "float_type": "must be a finite number, not {shown}",
    "finite_number": "must be a finite number, not {shown}",
    "list_type": "must be a list, not {shown}",
    "tuple_type": "must be a list, not {shown}",
    **dict.fromkeys(("int_type", "int_from_float", "greater_than_equal"), "integer"),
    **dict.fromkeys(("dict_type", "dataclass_type", "dataclass_exact_type"), "object"),
}


def malformed(exc: ValidationError) -> Malformed:
    """Pydantic's first error as the store's: the field's path and what is wrong with it."""
    error = exc.errors(include_url=False)[0]
    ctx = error.get("ctx") or {}
    problem = ctx.get("problem") or _PROBLEMS.get(error["type"], f"is invalid: {error['msg']}")
    if problem == "integer":
        problem = f"must be an integer of at least {ctx.get('ge', 0)}, not {{shown}}"
    elif problem == "object":
        problem = "must be an object, not {shown}"
    where = ""
    for key in error["loc"]:
        where = where if key == "extra" else at(where, key)
    suffix = ctx.get("suffix", "")
    where = f"{where}.{suffix}" if where and suffix[:1] not in ("", "[") else where + suffix
    return Malformed(where, problem.replace("{shown}", _shown(error["input"])))


def read(hint: object, value: object) -> Any:
    """The value of type `hint` that JSON `value` holds; `Malformed` names the field of a
    value this harness never writes."""
    try:
        return validator_of(hint).validate_python(value)
    except ValidationError as exc:
        raise malformed(exc) from None


def check_of(hint: object) -> Check:
    """The validator of a value of type `hint`."""

    def check(value: object, where: str) -> None:
        read(hint, value)

    return check


# -- the declarations, for the codecs and the docs ---------------------------------------------


def hints(cls: type) -> dict[str, object]:
    """A declaration's field types, `Annotated` metadata kept."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls, include_extras=True)
    return _HINTS[cls]


_HINTS: dict[type, dict[str, object]] = {}


def rule_of(hint: object) -> Rule | None:
    """The number rule a field type names (for the docs), if any."""
    extras: tuple[Any, ...] = ()
    if typing.get_origin(hint) is Annotated:
        hint, *more = typing.get_args(hint)
        extras = tuple(more)
    for extra in extras:
        if isinstance(extra, Rule):
            return extra
    args = typing.get_args(hint)
    rest = [a for a in args if a is not type(None)]
    if type(None) in args and len(rest) == 1:
        return rule_of(rest[0])
    origin = typing.get_origin(hint)
    if origin in (dict, Mapping, tuple, list) and args:
        return rule_of(args[-1] if origin in (dict, Mapping) else args[0])
    return None
