"""One-op models: a module whose forward is one call of one ATen op, with an argument
template (tensors as shape and dtype, the rest as JSON values) recorded from a real graph
(harness.zoo.generated.ops). `harness run --suite ops` exports, checks and times each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from harness.coverage.matrix import OPS_FAMILY
from harness.zoo.op_inventory import Inventory, Leaf, OpEntry, Template
from harness.zoo.spec import ModelSpec


def decode(template: Template, tensors: Callable[[Leaf], object]) -> object:
    """One argument's template back as Python values; each tensor leaf becomes `tensors(leaf)`."""
    if isinstance(template, list):
        return [decode(v, tensors) for v in template]
    if not isinstance(template, dict):
        return template
    ((kind, value),) = template.items()
    if kind == "tensor" and not isinstance(value, str):
        return tensors(value)
    if kind in ("dtype", "memory_format", "layout") and isinstance(value, str):
        return getattr(torch, value)
    if kind == "float" and isinstance(value, str):
        return float(value)
    raise ValueError(f"unknown template entry {kind!r}")


def tensor_leaves(args: list[Template], kwargs: dict[str, Template]) -> list[Leaf]:
    """The {shape, dtype, role} of every tensor of a call's template, in argument order
    (the order `decode` meets them)."""
    found: list[Leaf] = []

    def walk(template: Template) -> None:
        if isinstance(template, list):
            for v in template:
                walk(v)
        elif isinstance(template, dict) and "tensor" in template:
            leaf = template["tensor"]
            if not isinstance(leaf, str):
                found.append(leaf)

    for value in [*args, *kwargs.values()]:
        walk(value)
    return found


def input_leaves(args: list[Template], kwargs: dict[str, Template]) -> list[Leaf]:
    """The tensors that are the one-op model's inputs: those that were not parameters,
    buffers or constants in the real graph; all of them where none was (so that no
    exporter can fold the op away into a constant)."""
    leaves = tensor_leaves(args, kwargs)
    inputs = [leaf for leaf in leaves if leaf["role"] == "input"]
    return inputs or leaves


def model_name(op: str) -> str:
    """The zoo name of an op's model: the overload, lower-cased ('aten.add.tensor') since
    zoo names are [a-z0-9_.-]; the inventory keeps the real name beside it."""
    return op.lower()


def resolve(op: str) -> torch._ops.OpOverload:
    """'aten.conv2d.default' -> torch.ops.aten.conv2d.default."""
    namespace, packet, overload = op.split(".")
    found: torch._ops.OpOverload = getattr(getattr(getattr(torch.ops, namespace), packet), overload)
    return found


@dataclass(frozen=True)
class _Slot:
    """Where a tensor argument comes from at call time: forward's input i, or a buffer."""

    input: int | None = None
    buffer: str | None = None


class OneOp(torch.nn.Module):
    """A module whose forward is one call of one op, with the recorded argument template.

    Tensors that were parameters, buffers or constants in the real graph are buffers here
    (initializers in ONNX, as in the real model); the others are inputs (`input_leaves`).
    """

    def __init__(
        self,
        op: str,
        args: list[Template],
        kwargs: dict[str, Template],
        outputs: list[int] | None = None,
        floats: str = "normal",
    ) -> None:
        super().__init__()
        self.op_name = op
        self.op = resolve(op)
        self.outputs = outputs
        bound = _index_bound(tensor_leaves(args, kwargs))
        inputs = [id(leaf) for leaf in input_leaves(args, kwargs)]

        def slot(leaf: Leaf) -> _Slot:
            if id(leaf) in inputs:
                return _Slot(input=inputs.index(id(leaf)))
            name = f"state_{len(self._buffers)}"
            self.register_buffer(name, make_tensor(leaf, bound(leaf), floats))
            return _Slot(buffer=name)

        self._args = [decode(a, slot) for a in args]
        self._kwargs = {k: decode(v, slot) for k, v in kwargs.items()}

    def forward(self, *inputs: torch.Tensor) -> object:
        args = [self._fill(a, inputs) for a in self._args]
        kwargs = {k: self._fill(v, inputs) for k, v in self._kwargs.items()}
        result = self.op(*args, **kwargs)
        if self.outputs is None:
            return result
        return tuple(result[i] for i in self.outputs)

    def _fill(self, value: object, inputs: tuple[torch.Tensor, ...]) -> object:
        if isinstance(value, _Slot):
            return (
                inputs[value.input] if value.input is not None else getattr(self, str(value.buffer))
            )
        if isinstance(value, list):
            return [self._fill(v, inputs) for v in value]
        return value


def example_inputs(
    args: list[Template], kwargs: dict[str, Template], floats: str = "normal"
) -> tuple[torch.Tensor, ...]:
    """Random inputs of the recorded shapes and dtypes, in the order `OneOp.forward` takes them."""
    bound = _index_bound(tensor_leaves(args, kwargs))
    return tuple(make_tensor(leaf, bound(leaf), floats) for leaf in input_leaves(args, kwargs))


def _index_bound(leaves: list[Leaf]) -> Callable[[Leaf], int]:
    """Integer tensors get values in [0, bound): bound is the smallest dimension of the
    call's other tensors, so an integer tensor used as an index (embedding, gather,
    index, scatter) is valid along any dimension it may index; 2 when there is none."""

    def bound(leaf: Leaf) -> int:
        dims = [d for other in leaves if other is not leaf for d in other["shape"] if d > 0]
        return min(dims) if dims else 2

    return bound


_FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
_INT_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
GENERATED_DTYPES = frozenset((*_FLOAT_DTYPES, *_INT_DTYPES, torch.bool))
# How float tensors are drawn, in the order tried at capture: standard normal, or uniform
# in [0, 1) where normal values make the op's outputs non-finite.
FLOATS = ("normal", "uniform")


def make_tensor(leaf: Leaf, bound: int, floats: str = "normal") -> torch.Tensor:
    """A random tensor of the leaf's shape and dtype, from torch's global RNG (the harness
    seeds it): floats normal or uniform (`floats`), integers in [0, bound), bools a coin."""
    dtype, shape = getattr(torch, leaf["dtype"]), list(leaf["shape"])
    if dtype in _FLOAT_DTYPES:
        return (torch.randn(shape) if floats == "normal" else torch.rand(shape)).to(dtype)
    if dtype in _INT_DTYPES:
        return torch.randint(0, max(bound, 1), shape).to(dtype)
    return torch.rand(shape) < 0.5


# float16/bfloat16 ops cannot meet float32's default tolerance.
_LOW_PRECISION = {"float16": (1e-2, 1e-3), "bfloat16": (2e-2, 1e-2)}


def op_spec(entry: OpEntry) -> ModelSpec:
    """The zoo entry of one inventory op."""
    op, args, kwargs = entry["op"], entry["args"], entry["kwargs"]
    outputs, floats = entry.get("outputs"), entry.get("floats", FLOATS[0])
    dtypes = {leaf["dtype"] for leaf in tensor_leaves(args, kwargs)}
    tolerance = next((_LOW_PRECISION[d] for d in _LOW_PRECISION if d in dtypes), None)
    used_by = entry["models"]
    return ModelSpec(
        name=entry["name"],
        family=OPS_FAMILY,
        build=partial(OneOp, op, args, kwargs, outputs, floats),
        example_inputs=partial(example_inputs, args, kwargs, floats),
        tolerance=tolerance,
        tags=(OPS_FAMILY, f"ns:{op.split('.')[0]}"),
        description=(
            f"{op} alone, as {entry['first_call']['model']} calls it; "
            f"used by {len(used_by)} zoo model{'s' if len(used_by) != 1 else ''}"
        ),
    )


def specs_from_inventory(inventory: Inventory) -> list[ModelSpec]:
    return [op_spec(entry) for entry in inventory["ops"]]
