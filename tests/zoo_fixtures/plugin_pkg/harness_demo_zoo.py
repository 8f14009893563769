"""A zoo plugin module: `SPECS` (or `SPEC`) exactly as in a zoo file, found through its
`harness.zoo` entry point. The entry point may also name a callable returning specs."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec


class DemoGate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.fc(x))


SPECS = [
    ModelSpec(
        name="demo_gate",
        family="demo",
        build=DemoGate,
        example_inputs=lambda: (torch.rand(4, 8),),
        dynamic_shapes=({0: "batch"},),
        tags=("demo", "plugin"),
        description="Plugin demo: a sigmoid-gated Linear layer",
    ),
]
