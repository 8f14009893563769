"""Whisper's audio encoder (transformers WhisperEncoder) from a tiny config: log-mel frames -> hidden states."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo.hf._adapter import REQUIRES

N_MELS, MAX_POSITIONS = 16, 50


class WhisperEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import WhisperConfig
        from transformers.models.whisper.modeling_whisper import WhisperEncoder as Encoder

        config = WhisperConfig(
            vocab_size=1000, num_mel_bins=N_MELS, d_model=64, encoder_layers=2, encoder_attention_heads=4,
            encoder_ffn_dim=128, max_source_positions=MAX_POSITIONS,
            pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=3, begin_suppress_tokens=None,
        )  # fmt: skip
        self.encoder = Encoder(config)

    def forward(self, input_features: torch.Tensor) -> torch.Tensor:
        return self.encoder(input_features=input_features, return_dict=False)[0]


SPEC = ModelSpec(
    name="hf_whisper_encoder",
    family="hf",
    build=WhisperEncoder,
    # The encoder insists on exactly 2 x max_source_positions frames: only the batch is dynamic.
    example_inputs=lambda: (torch.randn(2, N_MELS, 2 * MAX_POSITIONS),),
    dynamic_shapes=({0: "batch"},),
    tags=("hf", "transformer", "audio", "encoder"),
    requires=REQUIRES,
    description="transformers WhisperEncoder, tiny config (16 mel bins, 100 frames, d_model 64, 2 layers)",
)
