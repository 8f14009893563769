"""T5 (transformers T5ForConditionalGeneration) from a tiny config: encoder-decoder with relative position buckets."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo.hf._adapter import REQUIRES, VOCAB, token_inputs


class T5(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import T5Config, T5ForConditionalGeneration

        config = T5Config(
            vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2, num_heads=4,
            relative_attention_num_buckets=16, decoder_start_token_id=0,
        )  # fmt: skip
        self.model = T5ForConditionalGeneration(config)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, decoder_input_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits, encoder_hidden = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            use_cache=False,
            return_dict=False,
        )
        return logits, encoder_hidden


def example_inputs() -> tuple[torch.Tensor, ...]:
    input_ids, attention_mask = token_inputs(2, 16)
    decoder_input_ids = torch.randint(0, VOCAB, (2, 8))
    return input_ids, attention_mask, decoder_input_ids


SPEC = ModelSpec(
    name="hf_t5",
    family="hf",
    build=T5,
    example_inputs=example_inputs,
    dynamic_shapes=(
        {0: "batch", 1: "sequence"},
        {0: "batch", 1: "sequence"},
        {0: "batch", 1: "target"},
    ),
    tags=("hf", "transformer", "encoder-decoder", "int64-inputs"),
    expect=(
        Expect(
            "dynamo",
            status="export_failed",
            stage="translate",
            reason="T5's SDPA attention (float position-bias mask): decomposing the exported program fails with "
            "'Cannot view a tensor ... as a tensor with shape (batch, seq, 64)' on the transpose of SDPA's "
            "output (torch 2.13, transformers 5.23; attn_implementation='eager' exports)",
        ),
    ),
    requires=REQUIRES,
    description="transformers T5ForConditionalGeneration, tiny config (d_model 64, 2+2 layers, 4 heads), no KV cache",
)
