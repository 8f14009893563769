"""The TorchScript exporter docs' SumModule: a reduction over axis 1 with a dynamic axis 0."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec


class SumModule(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def build() -> nn.Module:
    return SumModule()


def example_inputs() -> tuple[torch.Tensor, ...]:
    # The docs use torch.ones(2, 2); random values make a wrong reduction visible.
    return (torch.randn(2, 2),)


SPEC = ModelSpec(
    name="sum_module",
    family="seed",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "my_custom_axis_name"},),  # the docs' dynamic_axes={"x": {0: ...}}
    tags=("seed", "reduction", "doc-example", "smoke"),
    description="torch.onnx docs' SumModule: torch.sum(x, dim=1) with a dynamic axis 0",
)
