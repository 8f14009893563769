"""MobileNetV3-style CNN: depthwise blocks with squeeze-excite (hardsigmoid gate) and hardswish."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import ConvNormAct, SqueezeExcite, randomize_norm_stats


class Bneck(nn.Module):
    """MobileNetV3 bottleneck: expand, depthwise, optional SE, project."""

    def __init__(
        self,
        cin: int,
        hidden: int,
        cout: int,
        kernel: int,
        stride: int,
        se: bool,
        act: type[nn.Module],
    ) -> None:
        super().__init__()
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = [
            ConvNormAct(cin, hidden, 1, act=act),
            ConvNormAct(hidden, hidden, kernel, stride, groups=hidden, act=act),
        ]
        if se:
            layers.append(SqueezeExcite(hidden, max(8, hidden // 4), gate=nn.Hardsigmoid))
        layers.append(ConvNormAct(hidden, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.use_residual else self.block(x)


class MobileNetV3Small(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            ConvNormAct(3, 16, 3, 2, act=nn.Hardswish),
            Bneck(16, 16, 16, 3, 2, True, nn.ReLU),
            Bneck(16, 48, 24, 3, 2, False, nn.ReLU),
            Bneck(24, 64, 24, 3, 1, False, nn.ReLU),
            Bneck(24, 96, 32, 5, 2, True, nn.Hardswish),
            Bneck(32, 96, 32, 5, 1, True, nn.Hardswish),
            ConvNormAct(32, 96, 1, act=nn.Hardswish),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(96, 128), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(128, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


def build() -> nn.Module:
    return randomize_norm_stats(MobileNetV3Small())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="mobilenet_v3_small",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
    tags=("vision", "cnn", "depthwise", "squeeze-excite", "hardswish"),
    description="MobileNetV3-style CNN: depthwise bottlenecks, squeeze-excite with hardsigmoid, hardswish",
)
