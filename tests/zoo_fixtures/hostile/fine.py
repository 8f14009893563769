"""A well-behaved entry beside the hostile ones: it still loads."""

import torch

from harness.zoo import ModelSpec

SPEC = ModelSpec(
    name="hostile_neighbour",
    family="seed",
    build=lambda: torch.nn.Linear(2, 2),
    example_inputs=lambda: (torch.rand(1, 2),),
)
