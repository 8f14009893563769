"""Tiny models that say their weights are large (`parameter_bytes`): what the placement of
cells by memory reads (harness.plan.memory). A stand-in for size alone, which a test cannot
have for real (two 1 B models would not fit this machine): the models themselves are a
Linear each."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec

GIB = 1024**3


def _linear() -> torch.nn.Module:
    return torch.nn.Linear(4, 2)


SPECS = [
    ModelSpec(
        name=f"sized_{name}",
        family="seed",
        build=_linear,
        example_inputs=lambda: (torch.rand(3, 4),),
        metadata={"parameter_bytes": int(gib * GIB)},
    )
    for name, gib in (("small", 0.1), ("mid", 5.0), ("huge", 40.0))
]
