"""Models whose behaviour an environment variable changes, to inject regressions in
end-to-end comparison tests: HARNESS_INJECT_SLOWDOWN=1 makes `inj_slow` do 3x the work,
HARNESS_INJECT_UNSUPPORTED=1 makes `inj_op` use torch.cummax (which neither exporter
translates) instead of torch.cumsum."""

from __future__ import annotations

import os

import torch

from harness.zoo import ModelSpec


class Matmuls(torch.nn.Module):
    def __init__(self, repeats: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(192, 192) / 16)
        self.repeats = repeats

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.repeats):
            x = torch.tanh(x @ self.weight)
        return x


class Cumulative(torch.nn.Module):
    def __init__(self, unsupported: bool) -> None:
        super().__init__()
        self.unsupported = unsupported

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.unsupported:
            return torch.cummax(x, dim=1)[0]
        return torch.cumsum(x, dim=1)


def _slow() -> torch.nn.Module:
    return Matmuls(repeats=12 if os.environ.get("HARNESS_INJECT_SLOWDOWN") == "1" else 4)


def _op() -> torch.nn.Module:
    return Cumulative(unsupported=os.environ.get("HARNESS_INJECT_UNSUPPORTED") == "1")


SPECS = [
    ModelSpec(
        name="inj_slow", family="seed", build=_slow, example_inputs=lambda: (torch.randn(64, 192),)
    ),
    ModelSpec(
        name="inj_op", family="seed", build=_op, example_inputs=lambda: (torch.randn(8, 32),)
    ),
    # Unchanged models: enough cells for the comparison to estimate (and divide out) the
    # run-wide drift of a loaded machine.
    *[
        ModelSpec(
            name=f"inj_steady{i}",
            family="seed",
            build=lambda i=i: Matmuls(2 + i),
            example_inputs=lambda: (torch.randn(64, 192),),
        )
        for i in range(5)
    ],
]
