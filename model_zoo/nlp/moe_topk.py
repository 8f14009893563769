"""Mixture-of-experts layer: top-k routing with topk, softmax over the chosen experts, gather of expert outputs."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import Mlp

DIM, EXPERTS, TOP_K = 64, 4, 2


class MoETopK(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(DIM)
        self.router = nn.Linear(DIM, EXPERTS, bias=False)
        self.experts = nn.ModuleList(Mlp(DIM, 2 * DIM, nn.SiLU) for _ in range(EXPERTS))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.norm(x)
        logits = self.router(h)  # (batch, seq, experts)
        weights, chosen = logits.topk(TOP_K, dim=-1)
        weights = weights.softmax(dim=-1)
        # Dense dispatch (every expert sees every token), then keep the top-k outputs per
        # token: the export-friendly form, with no data-dependent token counts per expert.
        outputs = torch.stack([expert(h) for expert in self.experts], dim=-2)  # (b, s, E, dim)
        index = chosen[..., None].expand(*chosen.shape, DIM)
        picked = outputs.gather(-2, index)  # (b, s, k, dim)
        return x + (weights[..., None] * picked).sum(dim=-2), logits


def build() -> nn.Module:
    return MoETopK()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 16, DIM),)


SPEC = ModelSpec(
    name="moe_topk",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "sequence"},),
    tags=("nlp", "moe", "routing", "topk"),
    description="Mixture of experts: router, top-2 of 4 experts, softmax weights, gather of expert outputs",
    expect=(
        Expect(
            "torchscript-script",
            status="export_failed",
            stage="capture",
            reason="torch.jit.script: forward reads module-level int constants, which TorchScript "
            "cannot close over ('python value of type int cannot be used as a value')",
        ),
    ),
)
