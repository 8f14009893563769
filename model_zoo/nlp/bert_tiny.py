"""BERT-style encoder: token/position/type embeddings, post-norm layers, padding mask from int64 attention_mask."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import Attention, Mlp, padding_bias

VOCAB, DIM, MAX_POSITIONS = 1000, 64, 64


class BertLayer(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.attn = Attention(dim, heads)
        self.norm1 = nn.LayerNorm(dim, eps=1e-12)
        self.mlp = Mlp(dim, 4 * dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-12)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.attn(x, bias=bias))
        return self.norm2(x + self.mlp(x))


class BertTiny(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.word = nn.Embedding(VOCAB, DIM)
        self.position = nn.Embedding(MAX_POSITIONS, DIM)
        self.token_type = nn.Embedding(2, DIM)
        self.norm = nn.LayerNorm(DIM, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(DIM, 4) for _ in range(layers))
        self.pooler = nn.Linear(DIM, DIM)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        x = (
            self.word(input_ids)
            + self.position(positions)
            + self.token_type(torch.zeros_like(input_ids))
        )
        x = self.norm(x)
        bias = padding_bias(attention_mask, x.dtype)
        for layer in self.layers:
            x = layer(x, bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


def build() -> nn.Module:
    return BertTiny()


def example_inputs() -> tuple[torch.Tensor, ...]:
    input_ids = torch.randint(0, VOCAB, (2, 16))
    attention_mask = torch.ones(2, 16, dtype=torch.int64)
    attention_mask[1, 12:] = 0  # padding at the end of the second sequence
    return input_ids, attention_mask


SPEC = ModelSpec(
    name="bert_tiny",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"}),
    tags=("nlp", "transformer", "attention", "encoder", "int64-inputs"),
    description="BERT-style encoder: embeddings, 2 post-norm layers, additive padding mask, tanh pooler",
    expect=(
        Expect(
            "torchscript-script",
            status="export_failed",
            stage="capture",
            reason="torch.jit.script cannot compile torch.finfo (Unknown builtin op: aten::finfo), used "
            "for the additive mask",
        ),
    ),
)
