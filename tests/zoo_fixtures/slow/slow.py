"""Models that take a while to build, so a test can act while their cells run: `slow_*`
eight seconds, `paced_*` two (two of their cells running at once overlap for most of that,
so a test of the order cells run in can tell, without waiting eight)."""

from __future__ import annotations

import functools
import time

import torch

from harness.zoo import ModelSpec


def _sleeping_linear(seconds: float) -> torch.nn.Module:
    time.sleep(seconds)
    return torch.nn.Linear(4, 2)


SPECS = [
    ModelSpec(
        name=f"{prefix}_{i}",
        family="seed",
        build=functools.partial(_sleeping_linear, seconds),
        example_inputs=lambda: (torch.rand(3, 4),),
    )
    for prefix, seconds, count in (("slow", 8.0, 3), ("paced", 2.0, 2))
    for i in range(count)
]
