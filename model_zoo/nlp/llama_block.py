"""LLaMA-style decoder: RMSNorm, rotary position embeddings, grouped-query attention, SwiGLU MLP."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import RMSNorm, causal_bias

VOCAB, DIM, HEADS, KV_HEADS = 1000, 64, 4, 2
HEAD_DIM = DIM // HEADS


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class GQAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.k = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.v = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.o = nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q(x).reshape(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k(x).reshape(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v(x).reshape(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        # Grouped-query attention: each key/value head serves HEADS // KV_HEADS query heads.
        rep = HEADS // KV_HEADS
        k = k[:, :, None].expand(b, KV_HEADS, rep, t, HEAD_DIM).reshape(b, HEADS, t, HEAD_DIM)
        v = v[:, :, None].expand(b, KV_HEADS, rep, t, HEAD_DIM).reshape(b, HEADS, t, HEAD_DIM)
        scores = q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM) + bias
        out = scores.softmax(-1, dtype=torch.float32).to(q.dtype) @ v
        return self.o(out.transpose(1, 2).reshape(b, t, DIM))


class SwiGLU(nn.Module):
    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.gate = nn.Linear(DIM, hidden, bias=False)
        self.up = nn.Linear(DIM, hidden, bias=False)
        self.down = nn.Linear(hidden, DIM, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class LlamaLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1, self.attn = RMSNorm(DIM), GQAttention()
        self.norm2, self.mlp = RMSNorm(DIM), SwiGLU()

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, bias: torch.Tensor
    ) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), cos, sin, bias)
        return x + self.mlp(self.norm2(x))


class LlamaBlock(nn.Module):
    def __init__(self, layers: int = 2, theta: float = 10000.0) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(LlamaLayer() for _ in range(layers))
        self.norm = RMSNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        inv_freq = 1.0 / theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        t = input_ids.shape[1]
        x = self.embed(input_ids)
        freqs = (
            torch.arange(t, device=x.device, dtype=self.inv_freq.dtype)[:, None]
            * self.inv_freq[None]
        )
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        bias = causal_bias(t, t, x)
        for layer in self.layers:
            x = layer(x, cos, sin, bias)
        return self.lm_head(self.norm(x))


def build() -> nn.Module:
    return LlamaBlock()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, VOCAB, (2, 16)),)


SPEC = ModelSpec(
    name="llama_block",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "sequence"},),
    tags=("nlp", "transformer", "attention", "decoder", "causal", "rotary", "gqa", "int64-inputs"),
    description="LLaMA-style decoder: RMSNorm, rotary embeddings, grouped-query attention, SwiGLU",
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
