"""Segmentation and depth heads: an FPN-lite decoder that resizes with F.interpolate (nearest, bilinear)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import ConvNormAct, randomize_norm_stats


class SegHead(nn.Module):
    def __init__(self, classes: int = 3, width: int = 32) -> None:
        super().__init__()
        w = width
        self.c1 = ConvNormAct(3, w, 3, 2)  # 1/2
        self.c2 = ConvNormAct(w, w, 3, 2)  # 1/4
        self.c3 = ConvNormAct(w, 2 * w, 3, 2)  # 1/8
        self.lateral3 = nn.Conv2d(2 * w, w, 1)
        self.lateral2 = nn.Conv2d(w, w, 1)
        self.fuse = ConvNormAct(w, w)
        self.seg = nn.Conv2d(w, classes, 1)
        self.depth = nn.Conv2d(w, 1, 1)

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f2 = self.c2(self.c1(images))
        f3 = self.c3(f2)
        top = F.interpolate(self.lateral3(f3), scale_factor=2.0, mode="nearest")
        y = self.fuse(top + self.lateral2(f2))
        size = images.shape[-2:]
        seg = F.interpolate(self.seg(y), size=size, mode="bilinear", align_corners=False)
        depth = F.interpolate(self.depth(y), size=size, mode="bilinear", align_corners=True)
        return seg, F.softplus(depth)


def build() -> nn.Module:
    return randomize_norm_stats(SegHead())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="seg_head",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    # Image sizes must stay multiples of 8 so that 2x nearest upsampling meets the lateral.
    dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
    tags=("vision", "cnn", "segmentation", "depth", "interpolate"),
    description="Seg + depth heads: FPN-lite with nearest 2x upsampling, bilinear resize to the input size",
    expect=(
        Expect(
            "torchscript-script",
            status="checker_failed",
            stage="check",
            shape="dynamic",
            reason="scripted F.interpolate(size=images.shape[-2:]) exports a Concat of rank-1 and rank-2 "
            "inputs: onnx.checker's shape inference rejects the Concat",
        ),
    ),
)
