"""A zoo for the driver's scale benchmark: HARNESS_SCALE_MODELS models (default 179),
each needing a module that does not exist, so every cell goes through Ray and the worker
(task submitted, zoo file imported, spec found, requirement checked, record returned and
written) and ends `skipped` in milliseconds. With 2 exporters x 14 opsets x static and
dynamic that is 56 cells per model: 10 024 cells at the default."""

from __future__ import annotations

import os

import torch

from harness.zoo import ModelSpec

MODELS = int(os.environ.get("HARNESS_SCALE_MODELS", "179"))

SPECS = [
    ModelSpec(
        name=f"scale_{i:04d}",
        family="seed",
        build=lambda: torch.nn.Linear(4, 4),
        example_inputs=lambda: (torch.rand(2, 4),),
        dynamic_shapes=({0: "batch"},),
        requires=("harness_scale_benchmark_absent_module",),
    )
    for i in range(MODELS)
]
