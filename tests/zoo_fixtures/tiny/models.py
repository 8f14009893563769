"""A tiny zoo for end-to-end tests: two models that pass and one that cannot export."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec


class TinyMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc0 = torch.nn.Linear(8, 8)
        self.fc1 = torch.nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc1(torch.sigmoid(self.fc0(x)))


class TinyConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)).mean(dim=(2, 3))


class CumMax(torch.nn.Module):
    """torch.cummax: neither exporter translates it here (torch 2.13)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cummax(x, dim=1)[0]


SPECS = [
    ModelSpec(
        name="tiny_mlp",
        family="seed",
        build=TinyMLP,
        example_inputs=lambda: (torch.rand(4, 8),),
        dynamic_shapes=({0: "batch"},),
    ),
    ModelSpec(
        name="tiny_conv",
        family="vision",
        build=TinyConv,
        example_inputs=lambda: (torch.rand(2, 3, 8, 8),),
    ),
    ModelSpec(
        name="tiny_cummax",
        family="seed",
        build=CumMax,
        example_inputs=lambda: (torch.rand(3, 5),),
    ),
]
