"""EfficientNet-style CNN: MBConv blocks with SiLU and squeeze-excite."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import ConvNormAct, SqueezeExcite, randomize_norm_stats


class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvNormAct(cin, hidden, 1, act=nn.SiLU))
        layers += [
            ConvNormAct(hidden, hidden, kernel, stride, groups=hidden, act=nn.SiLU),
            SqueezeExcite(hidden, max(4, cin // 4), act=nn.SiLU),
            ConvNormAct(hidden, cout, 1, act=None),
        ]
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x) if self.use_residual else self.block(x)


class EfficientNetSmall(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            ConvNormAct(3, 16, 3, 2, act=nn.SiLU),
            MBConv(16, 16, 3, 1, 1),
            MBConv(16, 24, 3, 2, 4),
            MBConv(24, 24, 3, 1, 4),
            MBConv(24, 40, 5, 2, 4),
            MBConv(40, 40, 5, 1, 4),
            ConvNormAct(40, 128, 1, act=nn.SiLU),
        )
        self.head = nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2), nn.Linear(128, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def build() -> nn.Module:
    return randomize_norm_stats(EfficientNetSmall())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="efficientnet_small",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
    tags=("vision", "cnn", "depthwise", "squeeze-excite", "silu"),
    description="EfficientNet-style CNN: MBConv blocks with SiLU and squeeze-excite",
)
