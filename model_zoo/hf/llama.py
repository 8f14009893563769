"""LLaMA (transformers LlamaForCausalLM) from a tiny config with grouped-query attention and RoPE, no KV cache."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo.hf._adapter import REQUIRES, TINY, TOKEN_DYNAMIC_SHAPES, VOCAB, token_inputs


class Llama(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import LlamaConfig, LlamaForCausalLM

        config = LlamaConfig(
            vocab_size=VOCAB, max_position_embeddings=128, num_key_value_heads=2, **TINY
        )
        self.model = LlamaForCausalLM(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=False
        )
        return out[0]


SPEC = ModelSpec(
    name="hf_llama",
    family="hf",
    build=Llama,
    example_inputs=token_inputs,
    dynamic_shapes=TOKEN_DYNAMIC_SHAPES,
    tags=("hf", "transformer", "decoder", "rope", "gqa", "int64-inputs"),
    requires=REQUIRES,
    description="transformers LlamaForCausalLM, tiny config (hidden 64, 2 layers, 4 heads, 2 KV heads), no KV cache",
)
