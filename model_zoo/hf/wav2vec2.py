"""Wav2Vec2 (transformers Wav2Vec2Model) from a tiny config: raw waveform -> conv features -> transformer."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo.hf._adapter import REQUIRES, TINY


class Wav2Vec2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import Wav2Vec2Config, Wav2Vec2Model

        config = Wav2Vec2Config(
            conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **TINY,
        )  # fmt: skip
        self.model = Wav2Vec2Model(config)

    def forward(self, input_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        last_hidden, features = self.model(input_values=input_values, return_dict=False)[:2]
        return last_hidden, features


SPEC = ModelSpec(
    name="hf_wav2vec2",
    family="hf",
    build=Wav2Vec2,
    example_inputs=lambda: (torch.randn(2, 1600),),
    dynamic_shapes=({0: "batch", 1: "samples"},),
    tags=("hf", "transformer", "audio", "encoder"),
    requires=REQUIRES,
    description="transformers Wav2Vec2Model, tiny config (3 conv layers, hidden 64, 2 layers), random weights",
)
