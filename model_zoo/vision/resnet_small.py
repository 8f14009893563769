"""ResNet-style CNN: conv-BN-ReLU basic blocks with identity and strided 1x1 shortcuts."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import ConvNormAct, randomize_norm_stats


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = ConvNormAct(cin, cout, 3, stride)
        self.conv2 = ConvNormAct(cout, cout, 3, act=None)
        self.shortcut = (
            nn.Identity()
            if stride == 1 and cin == cout
            else ConvNormAct(cin, cout, 1, stride, act=None)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv2(self.conv1(x)) + self.shortcut(x))


class ResNetSmall(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = ConvNormAct(3, 16, 3, 2)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.layers = nn.Sequential(
            BasicBlock(16, 16), BasicBlock(16, 32, 2), BasicBlock(32, 64, 2)
        )
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.layers(self.pool(self.stem(x))))


def build() -> nn.Module:
    return randomize_norm_stats(ResNetSmall())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 32, 32),)


SPEC = ModelSpec(
    name="resnet_small",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
    tags=("vision", "cnn", "residual", "smoke"),
    description="ResNet-style CNN: residual basic blocks, max pool, global average pool",
)
