from __future__ import annotations

import torch

from harness.zoo import ModelSpec

SPEC = ModelSpec(
    name="plugin_ok",
    family="seed",
    build=lambda: torch.nn.Linear(4, 2),
    example_inputs=lambda: (torch.rand(3, 4),),
)
