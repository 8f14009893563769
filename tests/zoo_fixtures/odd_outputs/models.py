"""Models whose outputs are odd but legal: none at all, NaN throughout, no elements."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec


class ReturnsNone(torch.nn.Module):
    """Computes, then returns nothing (a forward that forgot its `return`)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> None:
        self.fc(x)


class AllNaN(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(-1.0 - x * x)  # the log of a negative number: NaN everywhere


class Empty(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :0] * 2.0  # a [2, 0] output: no element to compare


def _spec(name: str, build: type[torch.nn.Module]) -> ModelSpec:
    return ModelSpec(
        name=name, family="seed", build=build, example_inputs=lambda: (torch.rand(2, 4),)
    )


SPECS = [_spec("returns_none", ReturnsNone), _spec("all_nan", AllNaN), _spec("empty_output", Empty)]
