"""torch.onnx.ExportableModule (torch >= 2.10) as a zoo entry: the module carries its own
example arguments, dynamic shapes and input/output names, and `SPEC` is an instance of it
(harness/zoo.py turns it into a ModelSpec)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

IN, HIDDEN, OUT = 32, 64, 10


class ExportableMlp(torch.onnx.ExportableModule):
    """Two-layer GELU MLP with a softmax head, declaring its own export arguments"""

    zoo_name = "exportable_mlp"
    zoo_family = "exportable"

    def __init__(self) -> None:
        super().__init__()
        # SPEC is built once, at import: seed it here so every worker gets the same weights.
        with torch.random.fork_rng():
            torch.manual_seed(0)
            self.net = nn.Sequential(nn.Linear(IN, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, OUT))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.net(features), dim=-1)

    def example_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
        generator = torch.Generator().manual_seed(0)
        return (torch.randn(4, IN, generator=generator),), None

    def dynamic_shapes(self) -> Any:
        return ({0: "batch"},)

    def input_names(self) -> tuple[str, ...]:
        return ("features",)

    def output_names(self) -> tuple[str, ...]:
        return ("probabilities",)


SPEC = ExportableMlp()
