"""A zoo for the op coverage tests: a plain model and one per op whose support differs
between the exporters here (torch 2.13, checked by tests/e2e/test_coverage.py):
torch.cummax neither exports; torch.special.erfcx and torch.logcumsumexp only dynamo."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec


class Plain(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class CumMax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cummax(x, dim=1)[0] * 2


class Erfcx(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # erfcx overflows for large negative x; keep the argument where it is finite.
        return torch.special.erfcx(x.abs()) * 2


class LogCumSumExp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logcumsumexp(x, dim=1) - 1


def _image() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 8, 8),)


def _rows() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 6),)


SPECS = [
    ModelSpec(name="cov_plain", family="seed", build=Plain, example_inputs=_image),
    ModelSpec(name="cov_cummax", family="seed", build=CumMax, example_inputs=_rows),
    ModelSpec(name="cov_erfcx", family="seed", build=Erfcx, example_inputs=_rows),
    ModelSpec(name="cov_logcumsumexp", family="seed", build=LogCumSumExp, example_inputs=_rows),
]
