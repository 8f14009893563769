"""Building blocks shared by zoo entries (not an entry itself: the leading underscore).

Pure torch, small, deterministic under `torch.manual_seed`. Attention is written out
(q @ k^T, softmax) rather than taken from `nn.MultiheadAttention` unless an entry wants
the stock module on purpose, so that each entry says which attention it exercises.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def randomize_norm_stats(model: nn.Module) -> nn.Module:
    """Give every BatchNorm non-trivial running statistics and affine parameters.

    Freshly built BatchNorms are the identity in eval mode (mean 0, var 1, weight 1,
    bias 0), which would let a wrong BN export (or a wrong conv-BN fusion) pass.
    """
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return model


class ConvNormAct(nn.Sequential):
    """Conv2d (no bias) + BatchNorm2d + activation, the unit of every CNN here."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int = 3,
        stride: int = 1,
        *,
        groups: int = 1,
        act: type[nn.Module] | None = nn.ReLU,
    ) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
        ]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """Channel attention: global average pool, bottleneck, gate (sigmoid or hardsigmoid)."""

    def __init__(
        self,
        channels: int,
        reduced: int,
        *,
        act: type[nn.Module] = nn.ReLU,
        gate: type[nn.Module] = nn.Sigmoid,
    ) -> None:
        super().__init__()
        self.reduce = nn.Conv2d(channels, reduced, 1)
        self.act = act()
        self.expand = nn.Conv2d(reduced, channels, 1)
        self.gate = gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean(dim=(2, 3), keepdim=True)
        return x * self.gate(self.expand(self.act(self.reduce(s))))


class Attention(nn.Module):
    """Multi-head self- or cross-attention written out with matmul and softmax.

    `bias` is added to the scores (relative position bias, additive padding mask, causal
    mask as -inf-like values); it broadcasts against (batch, heads, q_len, k_len).
    """

    def __init__(self, dim: int, heads: int, *, qkv_bias: bool = True) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim, bias=qkv_bias)
        self.k = nn.Linear(dim, dim, bias=qkv_bias)
        self.v = nn.Linear(dim, dim, bias=qkv_bias)
        self.out = nn.Linear(dim, dim)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        return x.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        context: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        context = x if context is None else context
        q, k, v = self.split(self.q(x)), self.split(self.k(context)), self.split(self.v(context))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if bias is not None:
            scores = scores + bias
        out = scores.softmax(dim=-1) @ v
        b, _, t, _ = out.shape
        return self.out(out.transpose(1, 2).reshape(b, t, -1))


class Mlp(nn.Sequential):
    def __init__(self, dim: int, hidden: int, act: type[nn.Module] = nn.GELU) -> None:
        super().__init__(nn.Linear(dim, hidden), act(), nn.Linear(hidden, dim))


class TransformerBlock(nn.Module):
    """Pre-norm transformer encoder block (ViT, Whisper, BERT-with-pre-norm style)."""

    def __init__(self, dim: int, heads: int, mlp_ratio: int = 2) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, dim * mlp_ratio)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), bias=bias)
        return x + self.mlp(self.norm2(x))


class RMSNorm(nn.Module):
    """Root-mean-square norm without mean subtraction (T5, LLaMA)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def sinusoids(length: int, dim: int) -> torch.Tensor:
    """The fixed sinusoidal position table of "Attention Is All You Need" / Whisper."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    inv = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    return torch.cat([torch.sin(position * inv), torch.cos(position * inv)], dim=1)


def causal_bias(q_len: int, k_len: int, like: torch.Tensor) -> torch.Tensor:
    """Additive causal mask (q_len, k_len) built from aranges, so it follows dynamic sizes.

    Query i sits at absolute position k_len - q_len + i (the cache holds the rest). Uses
    the dtype's most negative finite value instead of -inf, as HF does, so a fully masked
    row gives a uniform softmax instead of NaN.
    """
    q_pos = torch.arange(q_len, device=like.device)[:, None] + (k_len - q_len)
    k_pos = torch.arange(k_len, device=like.device)[None, :]
    return (k_pos > q_pos).to(like.dtype) * torch.finfo(like.dtype).min


def padding_bias(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(batch, k_len) 1/0 mask -> (batch, 1, 1, k_len) additive bias, as BERT does."""
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min
