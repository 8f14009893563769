"""The cell: a model, an exporter and a value of every axis of the matrix
(harness.store.axes), as it goes into a worker and comes back in its record."""

from __future__ import annotations

from typing import Any, TypeVar

from harness.store.axes import (
    AXES,
    DEVICE,
    DTYPE,
    DYNAMIC,
    OPSET,
    ORT_OPT,
    PATCH,
    VARIANT,
    Axis,
    Dtype,
    OrtOpt,
    label_order,
)

CellKey = tuple[Any, ...]  # Cell.key: the model, the exporter and every axis's value
_INDEX = {axis.name: i for i, axis in enumerate(AXES)}
V = TypeVar("V")


class Cell:
    """One combination of the matrix: a model, an exporter and a value of every axis of
    `harness.store.axes.AXES` (opset, device, dynamic, variant, patch, dtype, ORT
    optimisation, ...), each checked against its axis; an axis not given is at its
    default. `family` says where the model comes from and is no part of the cell's
    identity. Axis values are given in the axes' order or by name:
    `Cell("m", "dynamo", 18, "cpu", dtype="float16")`; read them by name (`cell.opset`)
    or by axis (`cell[DTYPE]`)."""

    __slots__ = ("model", "exporter", "family", "values")
    model: str
    exporter: str
    family: str
    values: tuple[Any, ...]

    def __init__(
        self, model: str, exporter: str, *values: object, family: str = "", **named: object
    ) -> None:
        given = dict(zip(_INDEX, values, strict=False))
        if len(values) > len(AXES) or given.keys() & named.keys():
            raise TypeError(f"Cell() takes each of {', '.join(_INDEX)} once")
        if unknown := sorted(named.keys() - _INDEX.keys()):
            raise TypeError(f"Cell() has no axis {unknown[0]!r} (axes: {', '.join(_INDEX)})")
        given |= named
        if OPSET.name not in given:
            raise TypeError("Cell() needs an opset")
        coerced = tuple(a.coerce(given[a.name]) if a.name in given else a.default for a in AXES)
        for name, value in (("model", model), ("exporter", exporter), ("family", family)):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "values", coerced)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Cell is frozen: use replace({name}=...)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_cell, (self.model, self.exporter, self.values, self.family))

    def __getitem__(self, axis: Axis[V]) -> V:
        value: V = self.values[_INDEX[axis.name]]
        return value

    def replace(self, **changes: object) -> Cell:
        """The same cell with some of its parts (model, exporter, family, axes) changed."""
        parts: dict[str, object] = {a.name: v for a, v in zip(AXES, self.values, strict=True)}
        parts |= {"model": self.model, "exporter": self.exporter, "family": self.family}
        parts |= changes
        return Cell(parts.pop("model"), parts.pop("exporter"), family=parts.pop("family"), **parts)  # type: ignore[arg-type]

    @property
    def key(self) -> CellKey:
        return (self.model, self.exporter, *self.values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and self.key == other.key

    def __lt__(self, other: Cell) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        """The call that makes this cell again (each axis given by name, unless default)."""
        named = [f"{a.name}={a.json(v)!r}" for a, v in zip(AXES, self.values, strict=True)]
        kept = [n for n, a, v in zip(named, AXES, self.values, strict=True) if v != a.default]
        family = [f"family={self.family!r}"] if self.family else []
        return f"Cell({', '.join([repr(self.model), repr(self.exporter), *kept, *family])})"

    # The axes every stage reads, by name.

    @property
    def opset(self) -> int:
        return self[OPSET]

    @property
    def device(self) -> str:
        return self[DEVICE]

    @property
    def dynamic(self) -> bool:
        return self[DYNAMIC]

    @property
    def variant(self) -> str:
        return self[VARIANT]

    @property
    def patch(self) -> str:
        return self[PATCH]

    @property
    def dtype(self) -> Dtype:
        return self[DTYPE]

    @property
    def ort_opt(self) -> OrtOpt:
        return self[ORT_OPT]

    @property
    def cell_id(self) -> str:
        """A file-system safe name, unique within a run; names the artifacts folder."""
        parts = "".join(a.id_part(v) for a, v in zip(AXES, self.values, strict=True))
        return f"{self.model}--{self.exporter}{parts}"

    def label(self) -> str:
        """'m dynamo@18 cpu float16 dynamic [patch p]': the values that differ from the
        default, in the label's order."""
        parts = "".join(a.label_part(self[a]) for a in label_order())
        return f"{self.model} {self.exporter}{parts}"


def _cell(model: str, exporter: str, values: tuple[Any, ...], family: str) -> Cell:
    return Cell(model, exporter, *values, family=family)
