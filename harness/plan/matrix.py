"""Matrix expansion: pure, sorted, and announced ("N cells = ...")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.store.records import Cell


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
    dynamic: bool = False,
    variants: Sequence[str] = ("base",),
) -> Matrix:
    """Every (model, exporter, opset, device, shape, variant) combination, sorted.

    With `dynamic`, models that declare dynamic dimensions also get a dynamic cell per
    combination; models without them get only static cells.
    """
    cells = sorted(
        Cell(m.name, e, o, d, dyn, v, family=m.family)
        for m in models
        for e in exporters
        for o in opsets_for(e)
        for d in devices
        for dyn in ((False, True) if dynamic and m.has_dynamic else (False,))
        for v in variants
    )
    return Matrix(
        tuple(cells),
        announce(len(cells), models, exporters, opsets_for, devices, dynamic, variants),
    )


def announce(
    total: int,
    models: Sequence[ModelRef],
    exporters: Sequence[str],
    opsets_for: Callable[[str], Sequence[int]],
    devices: Sequence[str],
    dynamic: bool,
    variants: Sequence[str],
) -> str:
    opsets = sorted({o for e in exporters for o in opsets_for(e)})
    shapes = "static + dynamic" if dynamic and any(m.has_dynamic for m in models) else "static"
    parts = [
        f"{len(models)} models",
        f"{len(exporters)} exporters ({', '.join(exporters)})",
        f"opsets {', '.join(map(str, opsets))}",
        f"{len(devices)} device{'s' if len(devices) != 1 else ''} ({', '.join(devices)})",
        shapes,
    ]
    if list(variants) != ["base"]:
        parts.append(f"{len(variants)} variants ({', '.join(variants)})")
    return f"{total} cells = " + " x ".join(parts)
