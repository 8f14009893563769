"""Matrix expansion: pure, sorted, and announced ("N cells = ...")."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.store.axes import LIST_AXES
from harness.store.options import Shapes
from harness.store.records import Cell

DYNAMIC_ONLY = Shapes.ONLY  # the suite files' name for dynamic cells only


@dataclass(frozen=True)
class ModelRef:
    """What expansion needs to know of a model: no torch, no callables."""

    name: str
    family: str
    has_dynamic: bool


@dataclass(frozen=True)
class Matrix:
    cells: tuple[Cell, ...]
    announcement: str

    def __len__(self) -> int:
        return len(self.cells)


def expand(
    models: Sequence[ModelRef],
    exporters: Sequence[str],
    opsets_for: Callable[[str], Sequence[int]],
    devices: Sequence[str] = ("cpu",),
    *,
    dynamic: Shapes | bool | str = Shapes.STATIC,
    variants: Sequence[str] = ("base",),
    axes: Mapping[str, Sequence[Any]] | None = None,
) -> Matrix:
    """Every (model, exporter, opset, device, shape, variant, and a value of each list axis:
    patch, dtype, ORT optimisation, ...) combination, sorted. `axes` gives a list axis's
    values by its name; an axis it leaves out is at its default.

    With `Shapes.BOTH` (or True), models that declare dynamic dimensions also get a dynamic
    cell per combination; models without them get only static cells. With `Shapes.ONLY`,
    models get dynamic cells only (none where they declare no dynamic dimension).
    """
    dynamic = Shapes.of(dynamic)
    chosen = list_values(axes or {})
    names = [a.name for a in LIST_AXES]
    cells = sorted(
        Cell(m.name, e, o, d, dyn, v, family=m.family, **dict(zip(names, values, strict=True)))
        for m in models
        for e in exporters
        for o in opsets_for(e)
        for d in devices
        for dyn in _shapes(dynamic, m)
        for v in variants
        for values in itertools.product(*chosen.values())
    )
    text = announce(len(cells), models, exporters, opsets_for, devices, dynamic, variants, chosen)
    return Matrix(tuple(cells), text)


def list_values(axes: Mapping[str, Sequence[Any]]) -> dict[str, tuple[Any, ...]]:
    """Each list axis's values: those given, else its default alone."""
    return {a.name: tuple(axes.get(a.name) or (a.default,)) for a in LIST_AXES}


def _shapes(dynamic: Shapes, model: ModelRef) -> tuple[bool, ...]:
    if dynamic is Shapes.ONLY:
        return (True,) if model.has_dynamic else ()
    return (False, True) if dynamic is Shapes.BOTH and model.has_dynamic else (False,)


def announce(
    total: int,
    models: Sequence[ModelRef],
    exporters: Sequence[str],
    opsets_for: Callable[[str], Sequence[int]],
    devices: Sequence[str],
    dynamic: Shapes | bool | str,
    variants: Sequence[str],
    axes: Mapping[str, Sequence[Any]] | None = None,
) -> str:
    """'12 cells = 3 models x 2 exporters (dynamo, torchscript) x opsets 18 x 1 device
    (cpu) x static', with each list axis that is not at its default alone."""
    opsets = sorted({o for e in exporters for o in opsets_for(e)})
    any_dynamic = any(m.has_dynamic for m in models)
    dynamic = Shapes.of(dynamic)
    shapes = (
        "dynamic only"
        if dynamic is Shapes.ONLY
        else "static + dynamic"
        if dynamic is Shapes.BOTH and any_dynamic
        else "static"
    )
    parts = [
        f"{len(models)} models",
        f"{len(exporters)} exporters ({', '.join(exporters)})",
        f"opsets {', '.join(map(str, opsets))}",
        f"{len(devices)} device{'s' if len(devices) != 1 else ''} ({', '.join(devices)})",
        shapes,
    ]
    if list(variants) != ["base"]:
        parts.append(f"{len(variants)} variants ({', '.join(variants)})")
    for axis in LIST_AXES:
        values = list((axes or {}).get(axis.name) or (axis.default,))
        if values != [axis.default]:
            parts.append(f"{len(values)} {axis.many} ({', '.join(map(str, values))})")
    return f"{total} cells = " + " x ".join(parts)
