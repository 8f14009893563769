"""The docs' pitfall: an in-place `+=` on a value taken from tensor.shape while tracing."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec


class InplaceShape(nn.Module):
    def forward(self, states: torch.Tensor) -> torch.Tensor:
        _batch_size, seq_length = states.shape[:2]
        real_seq_length = seq_length
        real_seq_length += 2  # the pitfall: in tracing, this may also change seq_length
        # The docs return the int; a tensor that carries it keeps the model exportable.
        return states.mean(dim=-1) + (real_seq_length + seq_length)


def build() -> nn.Module:
    return InplaceShape()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 6, 4),)


SPEC = ModelSpec(
    name="inplace_shape",
    family="seed",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "sequence"},),
    tags=("seed", "shape-arithmetic", "doc-example"),
    description="torch.onnx docs' `real_seq_length += 2` on a shape value (tracing pitfall)",
    expect=(
        Expect(
            "torchscript",
            status="numerics_mismatch",
            stage="numerics",
            reason="the docs' pitfall: traced shape values are tensors sharing memory, so `+= 2` also "
            "changes seq_length and every output is off by 2",
        ),
    ),
)
