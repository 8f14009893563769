"""A deliberately broken export: a custom op that adds 1 in eager and whose registered ONNX
translation adds 2, after the first linear layer and its ReLU. The numerics mismatch
starts at that node; `first_divergence` must name it (issue 13)."""

from __future__ import annotations

import torch
from onnxscript import opset18 as op
from onnxscript.function_libs.torch_lib.registration import torch_op

from harness.zoo import ModelSpec


def _shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1.0


def _shift_onnx(x):  # type: ignore[no-untyped-def]
    return op.Add(x, op.CastLike(2.0, x))  # the wrong constant: eager adds 1


def _define_once() -> None:
    """The worker imports zoo files afresh for every cell; an op is defined once per process."""
    try:
        torch.ops.harness_test.shift  # noqa: B018 - raises where it is not defined yet
        return
    except AttributeError:
        pass
    shift = torch.library.custom_op("harness_test::shift", _shift, mutates_args=())
    shift.register_fake(torch.empty_like)
    torch_op("harness_test::shift", trace_only=True)(_shift_onnx)


_define_once()


class WrongConstant(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 8)
        self.second = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.first(x))
        y = torch.ops.harness_test.shift(y)
        return self.second(y)


class WrongConstantLast(torch.nn.Module):
    """The wrong node is the last one: its output is the graph's (renamed) output."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.harness_test.shift(torch.relu(self.first(x)))


SPECS = [
    ModelSpec(
        name="wrong_constant",
        family="seed",
        build=WrongConstant,
        example_inputs=lambda: (torch.rand(2, 4),),
        tags=("seed", "fidelity"),
    ),
    ModelSpec(
        name="wrong_constant_last",
        family="seed",
        build=WrongConstantLast,
        example_inputs=lambda: (torch.rand(2, 4),),
        tags=("seed", "fidelity"),
    ),
]
