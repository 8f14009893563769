"""A positional input tuple that ends in a dict: torch.onnx.export (both exporters) takes
the trailing dict as keyword arguments, so a direct export of this model fails while an
eager call with the same tuple works (issue 13)."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec


class TakesADict(torch.nn.Module):
    def forward(self, x: torch.Tensor, extras: dict[str, torch.Tensor]) -> torch.Tensor:
        return x * extras["scale"]


SPEC = ModelSpec(
    name="trailing_dict",
    family="seed",
    build=TakesADict,
    example_inputs=lambda: (torch.rand(2, 3), {"scale": torch.rand(2, 3)}),
    tags=("seed", "fidelity"),
)
