"""Two models where the first leaves process state that breaks the second: stands in for
torch's own per-process state (a static LSTM export breaks the next dynamic one)."""

from __future__ import annotations

import builtins

import torch

from harness.zoo import ModelSpec


def _leaves_state() -> torch.nn.Module:
    builtins._harness_test_poison = True  # type: ignore[attr-defined]
    return torch.nn.Linear(3, 3)


def _breaks_on_state() -> torch.nn.Module:
    if getattr(builtins, "_harness_test_poison", False):
        raise RuntimeError("state left by an earlier cell in this process")
    return torch.nn.Linear(3, 3)


SPECS = [
    ModelSpec(
        name="sticky_a",
        family="seed",
        build=_leaves_state,
        example_inputs=lambda: (torch.rand(2, 3),),
    ),
    ModelSpec(
        name="sticky_b",
        family="seed",
        build=_breaks_on_state,
        example_inputs=lambda: (torch.rand(2, 3),),
    ),
]
