"""GPT-2 (transformers GPT2LMHeadModel) from a tiny config, no KV cache: input_ids, attention_mask -> logits."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo.hf._adapter import REQUIRES, TOKEN_DYNAMIC_SHAPES, VOCAB, token_inputs


class Gpt2(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(
            vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4, n_inner=128,
            bos_token_id=0, eos_token_id=0,
        )  # fmt: skip
        self.model = GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        out = self.model(
            input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=False
        )
        return out[0]


SPEC = ModelSpec(
    name="hf_gpt2",
    family="hf",
    build=Gpt2,
    example_inputs=token_inputs,
    dynamic_shapes=TOKEN_DYNAMIC_SHAPES,
    tags=("hf", "transformer", "decoder", "int64-inputs"),
    expect=(
        Expect(
            "dynamo",
            "17",
            status="checker_failed",
            stage="check",
            reason="down-converting to opset 17 keeps Split's opset-18 attribute num_outputs (GPT-2's fused "
            "qkv projection is split in 3): onnx.checker rejects the node",
        ),
    ),
    requires=REQUIRES,
    description="transformers GPT2LMHeadModel, tiny config (hidden 64, 2 layers, 4 heads), no KV cache, random weights",
)
