"""Whisper-style audio encoder: conv stem on log-mel frames, sinusoidal positions, stock nn.TransformerEncoderLayer."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import sinusoids

N_MELS, DIM, MAX_FRAMES = 16, 64, 64


class WhisperEncoder(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(N_MELS, DIM, 3, padding=1)
        self.conv2 = nn.Conv1d(DIM, DIM, 3, stride=2, padding=1)
        self.register_buffer("positions", sinusoids(MAX_FRAMES, DIM), persistent=False)
        layer = nn.TransformerEncoderLayer(
            DIM,
            nhead=4,
            dim_feedforward=2 * DIM,
            dropout=0.0,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.layers = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(DIM)

    def forward(self, log_mel: torch.Tensor) -> torch.Tensor:
        """log_mel: (batch, N_MELS, frames) -> (batch, frames / 2, DIM)."""
        x = F.gelu(self.conv2(F.gelu(self.conv1(log_mel)))).transpose(1, 2)
        x = x + self.positions[: x.shape[1]]
        return self.norm(self.layers(x))


def build() -> nn.Module:
    return WhisperEncoder()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, N_MELS, 64),)


SPEC = ModelSpec(
    name="whisper_encoder",
    family="audio",
    build=build,
    example_inputs=example_inputs,
    # Frames may shrink but not grow past 2 * MAX_FRAMES (the position table's length).
    dynamic_shapes=({0: "batch", 2: "frames"},),
    tags=("audio", "transformer", "attention", "encoder"),
    description="Whisper-style encoder: Conv1d stem (stride 2), sinusoidal positions, nn.TransformerEncoder (pre-norm)",
    expect=(
        Expect(
            "torchscript",
            status="dynamic_mismatch",
            stage="dynamic",
            shape="dynamic",
            reason="traced nn.MultiheadAttention bakes the example's sequence length into a Reshape: ORT "
            "fails at another number of frames",
        ),
        Expect(
            "torchscript-script",
            status="export_failed",
            stage="translate",
            reason="scripted nn.MultiheadAttention calls torch.is_autocast_enabled, which has no ONNX symbolic",
        ),
    ),
)
