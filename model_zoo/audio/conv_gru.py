"""Acoustic model: 1-D conv front end over feature frames, then a 2-layer nn.GRU and per-frame logits."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import randomize_norm_stats

FEATURES, CLASSES = 40, 29


class ConvGRU(nn.Module):
    def __init__(self, channels: int = 64, hidden: int = 64) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(FEATURES, channels, 5, padding=2, bias=False),
            nn.BatchNorm1d(channels),
            nn.ReLU(),
            nn.Conv1d(channels, channels, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm1d(channels),
            nn.ReLU(),
        )
        self.gru = nn.GRU(channels, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, CLASSES)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """features: (batch, FEATURES, frames) -> (batch, frames / 2, CLASSES) log-probabilities."""
        states, _ = self.gru(self.conv(features).transpose(1, 2))
        return self.out(states).log_softmax(dim=-1)


def build() -> nn.Module:
    return randomize_norm_stats(ConvGRU())


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, FEATURES, 64),)


SPEC = ModelSpec(
    name="conv_gru",
    family="audio",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 2: "frames"},),
    tags=("audio", "cnn", "rnn", "gru"),
    description="Conv1d + BatchNorm front end (stride 2), 2-layer GRU, per-frame log-softmax",
    expect=(
        Expect(
            "dynamo",
            status="export_failed",
            stage="translate",
            shape="dynamic",
            reason="torch.onnx.export's capture swaps in a while-loop GRU decomposition for dynamic "
            "shapes, which fails when the time axis is a derived size (frames after the "
            "stride-2 conv): 'size of tensor a (64) must match ... b (192)'",
        ),
    ),
)
