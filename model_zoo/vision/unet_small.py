"""UNet-style encoder-decoder: max-pool downsampling, transposed-conv upsampling, skip concatenation."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import ConvNormAct, randomize_norm_stats


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(ConvNormAct(cin, cout), ConvNormAct(cout, cout))


class UNetSmall(nn.Module):
    def __init__(self, classes: int = 2, width: int = 16) -> None:
        super().__init__()
        w = width
        self.enc1, self.enc2 = double_conv(3, w), double_conv(w, 2 * w)
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = double_conv(2 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, 2)
        self.dec2 = double_conv(4 * w, 2 * w)
        self.up1 = nn.ConvTranspose2d(2 * w, w, 2, 2)
        self.dec1 = double_conv(2 * w, w)
        self.out = nn.Conv2d(w, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.enc1(x)
        s2 = self.enc2(self.pool(s1))
        y = self.bottleneck(self.pool(s2))
        y = self.dec2(torch.cat([self.up2(y), s2], dim=1))
        y = self.dec1(torch.cat([self.up1(y), s1], dim=1))
        return self.out(y)


def build() -> nn.Module:
    return randomize_norm_stats(UNetSmall())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="unet_small",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    # Height and width must stay multiples of 4 (two 2x poolings); the default halving does.
    dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
    tags=("vision", "cnn", "segmentation", "encoder-decoder"),
    description="UNet-style: two poolings, ConvTranspose2d upsampling, skip concatenation",
)
