"""Models whose build takes two seconds: two of their cells running at once overlap for
most of that, so a test of the order cells run in can tell, without slow/'s eight."""

from __future__ import annotations

import time

import torch

from harness.zoo import ModelSpec

BUILD_S = 2.0


def _paced_linear() -> torch.nn.Module:
    time.sleep(BUILD_S)
    return torch.nn.Linear(4, 2)


SPECS = [
    ModelSpec(
        name=f"paced_{i}",
        family="seed",
        build=_paced_linear,
        example_inputs=lambda: (torch.rand(3, 4),),
    )
    for i in range(2)
]
