"""BERT (transformers BertModel) from a tiny config: input_ids, attention_mask -> hidden states, pooled."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo.hf._adapter import REQUIRES, TINY, TOKEN_DYNAMIC_SHAPES, VOCAB, token_inputs


class Bert(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig(vocab_size=VOCAB, max_position_embeddings=64, **TINY)
        self.model = BertModel(config)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)


SPEC = ModelSpec(
    name="hf_bert",
    family="hf",
    build=Bert,
    example_inputs=token_inputs,
    dynamic_shapes=TOKEN_DYNAMIC_SHAPES,
    tags=("hf", "transformer", "encoder", "int64-inputs"),
    requires=REQUIRES,
    description="transformers BertModel, tiny config (hidden 64, 2 layers, 4 heads), random weights",
)
