"""Model inputs: flattening, dynamic dimensions, and the second shape that dynamic cells
are verified at. The zoo states dynamic dimensions once, torch.export-style
(`{axis: "name"}` per input); everything else is derived here."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

from harness.zoo.spec import DynamicShapes


@dataclass(frozen=True)
class Inputs:
    args: tuple[object, ...]
    kwargs: dict[str, object]
    # The model's forward parameter names, to align a spec keyed by parameter name.
    params: tuple[str, ...] = ()
    # The ONNX graph's input names, one per tensor leaf (the zoo entry's `input_names`);
    # empty: input_0, input_1, ...
    input_names: tuple[str, ...] = ()

    def leaves(self) -> list[torch.Tensor]:
        """The tensors in the order both exporters flatten them into graph inputs."""
        return [t for t, _ in _walk((self.args, self.kwargs), None)]

    def names(self) -> list[str]:
        count = len(self.leaves())
        if not self.input_names:
            return [f"input_{i}" for i in range(count)]
        if len(self.input_names) != count:
            raise ValueError(
                f"the entry names {len(self.input_names)} graph inputs"
                f" ({', '.join(self.input_names[:4])}, ...) but its inputs hold {count} tensors"
            )
        return list(self.input_names)

    def map_tensors(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Inputs:
        args = tuple(_map(a, fn) for a in self.args)
        kwargs = {k: _map(v, fn) for k, v in self.kwargs.items()}
        return Inputs(args, kwargs, self.params, self.input_names)

    def call(self, model: Callable[..., object]) -> object:
        """One eager call. A model may change what it is given in place (a KV cache grows by
        the new tokens), so objects other than plain tuples, lists and dicts (a registered
        pytree node such as transformers' DynamicCache) are passed as fresh copies: every
        call sees the inputs the graph is fed."""
        return model(
            *(_fresh(a) for a in self.args), **{k: _fresh(v) for k, v in self.kwargs.items()}
        )


def pytree_node(value: object) -> pytree.NodeDef | None:
    """The pytree registration of a container other than tuple, list and dict (a
    transformers cache, registered by transformers' export helpers), or None."""
    if isinstance(value, tuple | list | dict):
        return None
    return pytree.SUPPORTED_NODES.get(type(value))


def _map(value: object, fn: Callable[[torch.Tensor], torch.Tensor]) -> object:
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        return tuple(_map(v, fn) for v in value)
    if isinstance(value, list):
        return [_map(v, fn) for v in value]
    if isinstance(value, dict):
        return _same_kind(value, {k: _map(v, fn) for k, v in value.items()})
    node = pytree_node(value)
    if node is not None:
        children, context = node.flatten_fn(value)
        return node.unflatten_fn([_map(c, fn) for c in children], context)
    return value


def _same_kind(value: dict[object, object], items: dict[object, object]) -> object:
    """`items` as a dict of `value`'s own class (a model output transformers passes on,
    which the model reads by position: `encoder_outputs[0]`)."""
    return items if type(value) is dict else type(value)(items)


def _fresh(value: object) -> object:
    """`value` with every registered pytree node rebuilt around copies of its tensors."""
    if isinstance(value, tuple):
        return tuple(_fresh(v) for v in value)
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, dict):
        return _same_kind(value, {k: _fresh(v) for k, v in value.items()})
    if pytree_node(value) is not None:
        return _map(value, torch.Tensor.clone)
    return value


def _walk(value: object, spec: object) -> Iterator[tuple[torch.Tensor, dict[int, str]]]:
    """Yield (tensor, {axis: name}) for every tensor leaf, aligned with a dynamic spec
    of the same structure (None anywhere means static below that point)."""
    if isinstance(value, torch.Tensor):
        yield value, dict(spec) if isinstance(spec, dict) else {}
    elif isinstance(value, tuple | list):
        items = spec if isinstance(spec, tuple | list) else [None] * len(value)
        for v, s in zip(value, items, strict=False):
            yield from _walk(v, s)
    elif isinstance(value, dict):
        named = spec if isinstance(spec, dict) else {}
        for k, v in value.items():
            yield from _walk(v, named.get(k))
    elif (node := pytree_node(value)) is not None:
        # A registered container: its children in its flattening order, with a spec given
        # as a list of the same length (torch.export's form for such an input).
        yield from _walk(node.flatten_fn(value)[0], spec)


def _spec_for(inputs: Inputs, dynamic_shapes: DynamicShapes | None) -> object:
    """Align a spec with (args, kwargs): a tuple covers the positional inputs in order, a
    dict keyed by parameter names covers any of them (torch.export's two forms)."""
    if dynamic_shapes is None:
        return None
    if isinstance(dynamic_shapes, dict):
        positional = tuple(dynamic_shapes.get(p) for p in inputs.params[: len(inputs.args)])
        return (positional, {k: dynamic_shapes.get(k) for k in inputs.kwargs})
    return (tuple(dynamic_shapes), {})


def dynamic_axes(inputs: Inputs, dynamic_shapes: DynamicShapes | None) -> dict[str, dict[int, str]]:
    """TorchScript `dynamic_axes` ({input name: {axis: name}}) derived from the spec."""
    axes: dict[str, dict[int, str]] = {}
    leaves = _walk((inputs.args, inputs.kwargs), _spec_for(inputs, dynamic_shapes))
    for name, (_, dims) in zip(inputs.names(), leaves, strict=True):
        if dims:
            axes[name] = {int(a): str(n) for a, n in dims.items()}
    return axes


def dynamo_shapes(dynamic_shapes: object) -> object:
    """The spec with each name replaced by `Dim.DYNAMIC`, as torch.onnx.export does itself."""
    if isinstance(dynamic_shapes, dict) and all(isinstance(k, int) for k in dynamic_shapes):
        return {k: torch.export.Dim.DYNAMIC for k in dynamic_shapes}
    if isinstance(dynamic_shapes, dict):
        return {k: dynamo_shapes(v) for k, v in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, tuple | list):
        return type(dynamic_shapes)(dynamo_shapes(v) for v in dynamic_shapes)
    return dynamic_shapes


def second_shape(
    inputs: Inputs, dynamic_shapes: DynamicShapes | None, sizes: dict[str, int] | None
) -> Inputs:
    """The inputs resized along every dynamic dimension: axis-0 dimensions become 1, the
    others half their example size, unless the spec's `dynamic_sizes` says otherwise.

    Resizing slices (or tiles) the example tensors, so token ids stay valid ids and
    masks stay masks."""
    targets: dict[str, int] = dict(sizes or {})
    leaves = list(_walk((inputs.args, inputs.kwargs), _spec_for(inputs, dynamic_shapes)))
    for tensor, dims in leaves:
        for axis, name in dims.items():
            targets.setdefault(name, 1 if axis == 0 else max(1, tensor.shape[axis] // 2))
    resized = {id(t): _resize(t, dims, targets) for t, dims in leaves}
    return inputs.map_tensors(lambda t: resized.get(id(t), t))


def _resize(tensor: torch.Tensor, dims: dict[int, str], targets: dict[str, int]) -> torch.Tensor:
    for axis, name in dims.items():
        size = targets[name]
        current = tensor.shape[axis]
        if size > current:
            reps = [1] * tensor.dim()
            reps[axis] = -(-size // current)
            tensor = tensor.repeat(*reps)
        tensor = tensor.narrow(axis, 0, size)
    return tensor.contiguous()


def to_float64(inputs: Inputs) -> Inputs:
    return inputs.map_tensors(lambda t: t.double() if t.is_floating_point() else t)


def to_device(inputs: Inputs, device: str) -> Inputs:
    return inputs.map_tensors(lambda t: t.to(device))


def flatten_outputs(outputs: object) -> list[torch.Tensor]:
    """Eager outputs in the order the ONNX graph lists them (tensors only)."""
    return [t for t, _ in _walk(_as_container(outputs), None)]


def _as_container(outputs: object) -> object:
    # Dataclass-like model outputs (e.g. HF ModelOutput) flatten by their dict view.
    if hasattr(outputs, "to_tuple"):
        return outputs.to_tuple()
    return outputs
