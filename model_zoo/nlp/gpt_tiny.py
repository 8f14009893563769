"""GPT-style causal decoder: learned positions, causal mask from aranges, LM head tied to the embedding."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import TransformerBlock, causal_bias

VOCAB, DIM, MAX_POSITIONS = 1000, 64, 64


class GPTTiny(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(MAX_POSITIONS, DIM)
        self.blocks = nn.ModuleList(
            TransformerBlock(DIM, heads=4, mlp_ratio=4) for _ in range(layers)
        )
        self.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight  # tied weights: one initializer, two uses

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        x = self.wte(input_ids) + self.wpe(torch.arange(t, device=input_ids.device))[None]
        bias = causal_bias(t, t, x)
        for block in self.blocks:
            x = block(x, bias)
        return self.lm_head(self.norm(x))


def build() -> nn.Module:
    return GPTTiny()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, VOCAB, (2, 16)),)


SPEC = ModelSpec(
    name="gpt_tiny",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "sequence"},),
    tags=("nlp", "transformer", "attention", "decoder", "causal", "int64-inputs"),
    description="GPT-style decoder: learned positions, causal additive mask, tied LM head",
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
