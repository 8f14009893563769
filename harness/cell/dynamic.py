"""Dynamic cells after the export: the graph must keep every dimension the entry declared
dynamic (a dimension the exporter fixed to the example's size is a `dynamic_mismatch` even
where another shape happens to run), and it must give eager's numbers at each verification
shape and, where the entry names them, be timed at its latency shapes (a decode step, a
prefill)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import onnx
import torch

from harness.cell.shapes import Inputs, dynamic_axes, second_shape, to_device
from harness.zoo import ModelSpec
from harness.zoo.spec import SEED, DynamicShapes

SECOND_SHAPE = "second_shape"


class DimensionSpecialized(Exception):
    """The exported graph has a fixed size where the entry declared a dynamic dimension."""


@dataclass(frozen=True)
class FixedDim:
    """A declared-dynamic dimension the graph fixed: input `name`, `axis`, the declared
    dimension's name, and the size the graph holds."""

    input: str
    axis: int
    dim: str
    size: int


def fixed_dims(path: Path, inputs: Inputs, dynamic_shapes: DynamicShapes | None) -> list[FixedDim]:
    """The declared-dynamic dimensions of the graph's inputs that the graph holds at a fixed
    size. An input the graph dropped (unused) fixes nothing."""
    graph = onnx.load(str(path), load_external_data=False).graph
    shapes = {i.name: i.type.tensor_type.shape for i in graph.input}
    found = []
    for name, dims in dynamic_axes(inputs, dynamic_shapes).items():
        shape = shapes.get(name)
        if shape is None:
            continue
        for axis, dim in sorted(dims.items()):
            if axis < len(shape.dim) and shape.dim[axis].HasField("dim_value"):
                found.append(FixedDim(name, axis, dim, shape.dim[axis].dim_value))
    return found


def specialised_error(fixed: list[FixedDim]) -> DimensionSpecialized:
    """One error naming the dimensions (its first words group cells by dimension name in
    the report's failure clusters) and then each input and axis."""
    names = sorted({f.dim for f in fixed})
    where = "; ".join(f"{f.input} axis {f.axis} ({f.dim}) fixed at {f.size}" for f in fixed[:8])
    more = f"; and {len(fixed) - 8} more" if len(fixed) > 8 else ""
    return DimensionSpecialized(
        f"declared-dynamic dimension {', '.join(names)} fixed in the exported graph: {where}{more}"
    )


def verification_shapes(
    spec: ModelSpec, model: torch.nn.Module, inputs: Inputs
) -> list[tuple[str, Inputs]]:
    """The shapes a dynamic cell is verified at, each with its label: the entry's
    `dynamic_sizes` (one dict, or a tuple of them), else the default second shape."""
    sizes = spec.dynamic_sizes
    if isinstance(sizes, tuple):
        return [(shape_label(s), inputs_at(spec, model, inputs, s)) for s in sizes]
    return [(SECOND_SHAPE, inputs_at(spec, model, inputs, sizes))]


def latency_shapes(
    spec: ModelSpec, model: torch.nn.Module, inputs: Inputs
) -> dict[str, tuple[dict[str, int], Inputs]]:
    """The entry's named latency shapes (name -> its sizes and the inputs at them)."""
    named: Mapping[str, dict[str, int]] = spec.latency_shapes or {}
    return {
        name: (dict(sizes), inputs_at(spec, model, inputs, sizes)) for name, sizes in named.items()
    }


def inputs_at(
    spec: ModelSpec, model: torch.nn.Module, inputs: Inputs, sizes: Mapping[str, int] | None
) -> Inputs:
    """The inputs at these sizes of the dynamic dimensions: the entry's own `inputs_at`
    (under the seed, on the example's device) where it has one, else the example sliced or
    tiled along them (`second_shape`; missing sizes default there)."""
    if spec.inputs_at is None or sizes is None:
        return second_shape(inputs, spec.dynamic_shapes, dict(sizes) if sizes else None)
    torch.manual_seed(SEED)
    with torch.no_grad():
        args = tuple(spec.inputs_at(model, dict(sizes)))
    other = Inputs(args, {}, inputs.params, inputs.input_names)
    device = next(iter(inputs.leaves()), torch.empty(0)).device.type
    return to_device(other, device) if device != "cpu" else other


class NoBatchDimension(Exception):
    """The entry declares no `batch` dimension to resize its inputs along."""


def at_batch(spec: ModelSpec, model: torch.nn.Module, inputs: Inputs, batch: int) -> Inputs:
    """The example inputs at a batch size (the cell's batch axis; 0: the example's own),
    resized along the dimensions the entry's dynamic shapes name `batch`."""
    if not batch:
        return inputs
    named = dynamic_axes(inputs, spec.dynamic_shapes) if spec.dynamic_shapes else {}
    if not any("batch" in dims.values() for dims in named.values()):
        raise NoBatchDimension(f"the entry declares no batch dimension to make batch {batch}")
    tensors = dict(zip(inputs.names(), inputs.leaves(), strict=False))
    sizes = {
        dim: tensors[name].shape[axis] for name, dims in named.items() for axis, dim in dims.items()
    }
    return inputs_at(spec, model, inputs, {**sizes, "batch": batch})


def shape_label(sizes: Mapping[str, int]) -> str:
    """'batch=1,past=0,sequence=4': a verification shape as output names carry it."""
    return ",".join(f"{k}={v}" for k, v in sorted(sizes.items()))
