"""Matrix expansion: pure, sorted, and announced ("N cells = ...")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.store.options import Shapes
from harness.store.records import NO_PATCH, Cell, Dtype, OrtOpt

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
    patches: Sequence[str] = (NO_PATCH,),
    dtypes: Sequence[Dtype] = (Dtype.FLOAT32,),
    ort_opts: Sequence[OrtOpt] = (OrtOpt.DEFAULT,),
) -> Matrix:
    """Every (model, exporter, opset, device, shape, variant, patch, dtype, ORT optimisation)
    combination, sorted.

    With `Shapes.BOTH` (or True), models that declare dynamic dimensions also get a dynamic
    cell per combination; models without them get only static cells. With `Shapes.ONLY`,
    models get dynamic cells only (none where they declare no dynamic dimension).
    """
    dynamic = Shapes.of(dynamic)
    cells = sorted(
        Cell(m.name, e, o, d, dyn, v, family=m.family, patch=p, dtype=t, ort_opt=g)
        for m in models
        for e in exporters
        for o in opsets_for(e)
        for d in devices
        for dyn in _shapes(dynamic, m)
        for v in variants
        for p in patches
        for t in dtypes
        for g in ort_opts
    )
    axes = (devices, dynamic, variants, patches, dtypes, ort_opts)
    return Matrix(tuple(cells), announce(len(cells), models, exporters, opsets_for, *axes))


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
    patches: Sequence[str] = (NO_PATCH,),
    dtypes: Sequence[Dtype] = (Dtype.FLOAT32,),
    ort_opts: Sequence[OrtOpt] = (OrtOpt.DEFAULT,),
) -> str:
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
    if list(patches) != [NO_PATCH]:
        parts.append(f"{len(patches)} patches ({', '.join(patches)})")
    if list(dtypes) != [Dtype.FLOAT32]:
        parts.append(f"{len(dtypes)} dtypes ({', '.join(dtypes)})")
    if list(ort_opts) != [OrtOpt.DEFAULT]:
        parts.append(f"{len(ort_opts)} ORT optimisations ({', '.join(ort_opts)})")
    return f"{total} cells = " + " x ".join(parts)
