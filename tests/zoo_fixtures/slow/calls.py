"""A model whose one call takes a real-size model's time (a 4096-wide Linear over a batch of 1024:
about 34 GFLOP, hundreds of ms on one thread), in a small file: what the latency stage
decides by how long one call lasts."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec

SPECS = [
    ModelSpec(
        name="long_call",
        family="seed",
        build=lambda: torch.nn.Linear(4096, 4096),
        example_inputs=lambda: (torch.rand(1024, 4096),),
    )
]
