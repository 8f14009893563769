"""A model name that passes a `re.match` with `$` (which matches before a final newline)."""

import torch

from harness.zoo import ModelSpec

SPEC = ModelSpec(
    name="newline_model\n",
    family="seed",
    build=lambda: torch.nn.Linear(2, 2),
    example_inputs=lambda: (torch.rand(1, 2),),
)
