"""YOLO-style detection head: two-scale anchor predictions decoded on a meshgrid of cell offsets."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import ConvNormAct, randomize_norm_stats

ANCHORS = ((10.0, 13.0), (16.0, 30.0), (33.0, 23.0)), ((30.0, 61.0), (62.0, 45.0), (59.0, 119.0))


class Detect(nn.Module):
    """One scale: 1x1 conv to anchors * (5 + classes), then YOLOv5 grid decoding."""

    def __init__(
        self, cin: int, classes: int, anchors: tuple[tuple[float, float], ...], stride: int
    ) -> None:
        super().__init__()
        self.na, self.no, self.stride = len(anchors), classes + 5, stride
        self.conv = nn.Conv2d(cin, self.na * self.no, 1)
        self.register_buffer(
            "anchors", torch.tensor(anchors).reshape(1, self.na, 1, 1, 2), persistent=False
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.conv(x)
        b, _, h, w = p.shape
        p = p.reshape(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        gy, gx = torch.meshgrid(
            torch.arange(h, device=x.device, dtype=x.dtype),
            torch.arange(w, device=x.device, dtype=x.dtype),
            indexing="ij",
        )
        grid = torch.stack((gx, gy), dim=-1).reshape(1, 1, h, w, 2)
        xy = (p[..., :2] * 2 - 0.5 + grid) * self.stride
        wh = (p[..., 2:4] * 2) ** 2 * self.anchors
        return torch.cat([xy, wh, p[..., 4:]], dim=-1).reshape(b, -1, self.no)


class YoloHead(nn.Module):
    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.p3 = nn.Sequential(
            ConvNormAct(3, 16, 3, 2, act=nn.SiLU),
            ConvNormAct(16, 32, 3, 2, act=nn.SiLU),
            ConvNormAct(32, 64, 3, 2, act=nn.SiLU),
        )
        self.p4 = ConvNormAct(64, 64, 3, 2, act=nn.SiLU)
        self.detect3 = Detect(64, classes, ANCHORS[0], 8)
        self.detect4 = Detect(64, classes, ANCHORS[1], 16)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        f3 = self.p3(images)
        f4 = self.p4(f3)
        return torch.cat([self.detect3(f3), self.detect4(f4)], dim=1)


def build() -> nn.Module:
    return randomize_norm_stats(YoloHead())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="yolo_head",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    # Image sizes must stay multiples of 16 (the coarser scale); the default halving does.
    dynamic_shapes=({0: "batch", 2: "height", 3: "width"},),
    tags=("vision", "cnn", "detection"),
    description="YOLO-style head: two scales, anchors, sigmoid grid decoding with meshgrid offsets",
)
