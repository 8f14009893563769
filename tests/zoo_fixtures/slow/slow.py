"""Models that take a while to build, so a test can act while their cells run."""

from __future__ import annotations

import time

import torch

from harness.zoo import ModelSpec


def _slow_linear() -> torch.nn.Module:
    time.sleep(8)
    return torch.nn.Linear(4, 2)


SPECS = [
    ModelSpec(
        name=f"slow_{i}",
        family="seed",
        build=_slow_linear,
        example_inputs=lambda: (torch.rand(3, 4),),
    )
    for i in range(3)
]
