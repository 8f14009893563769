"""A model whose export memory budget no export can meet (worker budget test)."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec

SPEC = ModelSpec(
    name="budget_zero",
    family="seed",
    build=lambda: torch.nn.Linear(256, 256),
    example_inputs=lambda: (torch.rand(2, 256),),
    max_export_memory_ratio=-1.0,  # below any measurable peak, even 0 MiB
)
