"""Encoder on F.scaled_dot_product_attention: a bool padding-mask input, then an is_causal layer."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import Mlp

DIM, HEADS = 64, 4


class SdpaLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.mlp = Mlp(DIM, 2 * DIM)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = (
            self.qkv(self.norm1(x)).reshape(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        )
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
        x = x + self.proj(out.transpose(1, 2).reshape(b, t, DIM))
        return x + self.mlp(self.norm2(x))


class SdpaEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.padded = SdpaLayer()
        self.causal = SdpaLayer()
        self.norm = nn.LayerNorm(DIM)

    def forward(self, x: torch.Tensor, key_padding: torch.Tensor) -> torch.Tensor:
        """key_padding: bool (batch, sequence), True where the key may be attended."""
        x = self.padded(x, key_padding[:, None, None, :], is_causal=False)
        x = self.causal(x, None, is_causal=True)
        return self.norm(x)


def build() -> nn.Module:
    return SdpaEncoder()


def example_inputs() -> tuple[torch.Tensor, ...]:
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 10:] = False  # padded tail of the second sequence
    return torch.randn(2, 16, DIM), mask


SPEC = ModelSpec(
    name="sdpa_encoder",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"}),
    tags=("nlp", "transformer", "attention", "sdpa", "bool-inputs"),
    description="F.scaled_dot_product_attention with a bool attn_mask input and with is_causal=True",
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
