"""Wav2Vec2-style feature encoder: strided 1-D convs on raw audio with GroupNorm and GELU, then projection."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec


class Wav2Vec2Features(nn.Module):
    def __init__(self, channels: int = 32, dim: int = 64) -> None:
        super().__init__()
        c = channels
        layers: list[nn.Module] = [
            nn.Conv1d(1, c, 10, 5, bias=False),
            nn.GroupNorm(c, c),
            nn.GELU(),
        ]
        for kernel in (3, 3, 3, 2):
            layers += [nn.Conv1d(c, c, kernel, 2, bias=False), nn.GELU()]
        self.conv = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(c)
        self.projection = nn.Linear(c, dim)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        """waveform: (batch, samples) -> (batch, frames, dim)."""
        features = self.conv(waveform[:, None]).transpose(1, 2)
        return self.projection(self.norm(features))


def build() -> nn.Module:
    return Wav2Vec2Features()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 1600),)


SPEC = ModelSpec(
    name="wav2vec2_features",
    family="audio",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "samples"},),
    tags=("audio", "cnn", "groupnorm"),
    description="Wav2Vec2 feature encoder: 5 strided Conv1d, per-channel GroupNorm, GELU, LayerNorm projection",
)
