"""T5-style encoder-decoder: RMSNorm, unscaled attention, bucketed relative position bias, cross-attention."""

from __future__ import annotations

import math

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import RMSNorm

VOCAB, DIM, HEADS, BUCKETS, MAX_DISTANCE = 1000, 64, 4, 32, 128


def relative_bucket(relative: torch.Tensor, bidirectional: bool) -> torch.Tensor:
    """T5's bucketing: exact buckets for small distances, log-spaced ones up to MAX_DISTANCE."""
    buckets, offset = BUCKETS, torch.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        offset = (relative > 0).long() * buckets
        n = relative.abs()
    else:
        n = -torch.clamp(relative, max=0)
    max_exact = buckets // 2
    scaled = (
        torch.log(n.float() / max_exact)
        / math.log(MAX_DISTANCE / max_exact)
        * (buckets - max_exact)
    )
    large = torch.clamp(max_exact + scaled.long(), max=buckets - 1)
    return offset + torch.where(n < max_exact, n, large)


class T5Attention(nn.Module):
    """T5 attention: no bias on projections, no 1/sqrt(d) scaling, optional learned position bias."""

    def __init__(self, has_bias: bool, bidirectional: bool) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(DIM, DIM, bias=False) for _ in range(4))
        self.bidirectional = bidirectional
        self.position_bias = nn.Embedding(BUCKETS, HEADS) if has_bias else None

    def compute_bias(self, q_len: int, k_len: int, device: torch.device) -> torch.Tensor:
        assert self.position_bias is not None
        relative = (
            torch.arange(k_len, device=device)[None, :]
            - torch.arange(q_len, device=device)[:, None]
        )
        bias = self.position_bias(relative_bucket(relative, self.bidirectional))  # (q, k, heads)
        return bias.permute(2, 0, 1)[None]

    def forward(self, x: torch.Tensor, context: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.q(x).reshape(b, t, HEADS, -1).transpose(1, 2)
        k = self.k(context).reshape(b, context.shape[1], HEADS, -1).transpose(1, 2)
        v = self.v(context).reshape(b, context.shape[1], HEADS, -1).transpose(1, 2)
        out = ((q @ k.transpose(-2, -1)) + bias).softmax(-1) @ v
        return self.o(out.transpose(1, 2).reshape(b, t, DIM))


class FeedForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wi = nn.Linear(DIM, 2 * DIM, bias=False)
        self.wo = nn.Linear(2 * DIM, DIM, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.wo(torch.relu(self.wi(x)))


class EncoderLayer(nn.Module):
    def __init__(self, first: bool) -> None:
        super().__init__()
        self.norm1, self.attn = RMSNorm(DIM), T5Attention(first, bidirectional=True)
        self.norm2, self.ff = RMSNorm(DIM), FeedForward()

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, bias)
        return x + self.ff(self.norm2(x))


class DecoderLayer(nn.Module):
    def __init__(self, first: bool) -> None:
        super().__init__()
        self.norm1, self.self_attn = RMSNorm(DIM), T5Attention(first, bidirectional=False)
        self.norm2, self.cross_attn = RMSNorm(DIM), T5Attention(False, bidirectional=True)
        self.norm3, self.ff = RMSNorm(DIM), FeedForward()

    def forward(self, x: torch.Tensor, memory: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.self_attn(h, h, bias)
        x = x + self.cross_attn(
            self.norm2(x), memory, torch.zeros((), dtype=x.dtype, device=x.device)
        )
        return x + self.ff(self.norm3(x))


class T5Tiny(nn.Module):
    def __init__(self, layers: int = 2) -> None:
        super().__init__()
        self.shared = nn.Embedding(VOCAB, DIM)
        self.encoder = nn.ModuleList(EncoderLayer(i == 0) for i in range(layers))
        self.encoder_norm = RMSNorm(DIM)
        self.decoder = nn.ModuleList(DecoderLayer(i == 0) for i in range(layers))
        self.decoder_norm = RMSNorm(DIM)

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        s, t = input_ids.shape[1], decoder_input_ids.shape[1]
        x = self.shared(input_ids)
        bias = self.encoder[0].attn.compute_bias(s, s, x.device)  # computed once, shared by layers
        for layer in self.encoder:
            x = layer(x, bias)
        memory = self.encoder_norm(x)

        y = self.shared(decoder_input_ids)
        causal = (
            torch.arange(t, device=y.device)[None, :] > torch.arange(t, device=y.device)[:, None]
        )
        bias = self.decoder[0].self_attn.compute_bias(t, t, y.device)
        bias = bias + causal.to(y.dtype) * torch.finfo(y.dtype).min
        for layer in self.decoder:
            y = layer(y, memory, bias)
        return self.decoder_norm(y) @ self.shared.weight.t() * DIM**-0.5  # tied, rescaled LM head


def build() -> nn.Module:
    return T5Tiny()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return torch.randint(0, VOCAB, (2, 16)), torch.randint(0, VOCAB, (2, 8))


SPEC = ModelSpec(
    name="t5_tiny",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "encoder_sequence"}, {0: "batch", 1: "decoder_sequence"}),
    tags=(
        "nlp",
        "transformer",
        "attention",
        "encoder-decoder",
        "relative-position",
        "int64-inputs",
    ),
    description="T5-style encoder-decoder: RMSNorm, log-bucketed relative position bias, cross-attention",
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
