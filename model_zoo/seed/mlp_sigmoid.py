"""The docs' first example: a 4-layer MLP with sigmoid activations on a (97, 8) input."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec


class MLPModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc0 = nn.Linear(8, 8, bias=True)
        self.fc1 = nn.Linear(8, 4, bias=True)
        self.fc2 = nn.Linear(4, 2, bias=True)
        self.fc3 = nn.Linear(2, 2, bias=True)

    def forward(self, tensor_x: torch.Tensor) -> torch.Tensor:
        tensor_x = torch.sigmoid(self.fc0(tensor_x))
        tensor_x = torch.sigmoid(self.fc1(tensor_x))
        tensor_x = torch.sigmoid(self.fc2(tensor_x))
        return self.fc3(tensor_x)


def build() -> nn.Module:
    return MLPModel()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.rand((97, 8), dtype=torch.float32),)


SPEC = ModelSpec(
    name="mlp_sigmoid",
    family="seed",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch"},),
    tags=("seed", "mlp", "doc-example", "smoke"),
    description="torch.onnx docs' MLPModel: Linear + sigmoid x4 on a (97, 8) input",
)
