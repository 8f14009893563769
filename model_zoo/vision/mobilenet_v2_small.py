"""MobileNetV2-style CNN: inverted residuals with depthwise convs, ReLU6 and hardswish."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import ConvNormAct, randomize_norm_stats


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, act: type[nn.Module]) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        self.block = nn.Sequential(
            ConvNormAct(cin, hidden, 1, act=act),
            ConvNormAct(hidden, hidden, 3, stride, groups=hidden, act=act),  # depthwise
            ConvNormAct(hidden, cout, 1, act=None),  # linear bottleneck
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.use_residual else self.block(x)


class MobileNetV2Small(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            ConvNormAct(3, 16, 3, 2, act=nn.Hardswish),
            InvertedResidual(16, 16, 1, 1, nn.ReLU6),
            InvertedResidual(16, 24, 2, 4, nn.ReLU6),
            InvertedResidual(24, 24, 1, 4, nn.ReLU6),
            InvertedResidual(24, 32, 2, 4, nn.Hardswish),
            InvertedResidual(32, 32, 1, 4, nn.Hardswish),
            ConvNormAct(32, 128, 1, act=nn.Hardswish),
        )
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(128, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean(dim=(2, 3)))


def build() -> nn.Module:
    return randomize_norm_stats(MobileNetV2Small())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="mobilenet_v2_small",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
    tags=("vision", "cnn", "depthwise", "hardswish"),
    description="MobileNetV2-style CNN: inverted residuals, depthwise convs, ReLU6 and hardswish",
)
