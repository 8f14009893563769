"""torchvision's classifiers built by their constructors with `weights=None` (random
weights, nothing downloaded), BatchNorm statistics randomized so that a wrong BN export
cannot pass. torchvision is imported only inside `build`: where it does not import (no
build for this torch), the cells are recorded as skipped with the reason."""

from __future__ import annotations

import functools

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import randomize_norm_stats

# name in torchvision.models -> extra tags
MODELS = {
    "resnet18": ("cnn", "residual"),
    "mobilenet_v3_small": ("cnn", "depthwise", "squeeze-excite"),
    "squeezenet1_0": ("cnn", "fire-module"),
    "shufflenet_v2_x0_5": ("cnn", "channel-shuffle"),
}


def build(constructor: str) -> nn.Module:
    import torchvision

    model = getattr(torchvision.models, constructor)(weights=None)
    return randomize_norm_stats(model)


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.rand(2, 3, 224, 224),)


SPECS = [
    ModelSpec(
        name=f"tv_{constructor}",
        family="torchvision",
        build=functools.partial(build, constructor),
        example_inputs=example_inputs,
        dynamic_shapes=({0: "batch"},),
        tags=("torchvision", *tags),
        requires=("torchvision",),
        description=f"torchvision.models.{constructor}(weights=None), 224x224, randomized BatchNorm statistics",
    )
    for constructor, tags in MODELS.items()
]
