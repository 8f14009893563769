"""Swin-style transformer: windowed attention with relative position bias, shifted windows via torch.roll."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import Mlp


def window_partition(x: torch.Tensor, ws: int) -> torch.Tensor:
    """(B, H, W, C) -> (B * windows, ws * ws, C)."""
    _, h, w, c = x.shape
    x = x.reshape(-1, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, ws * ws, c)


def window_reverse(windows: torch.Tensor, ws: int, h: int, w: int) -> torch.Tensor:
    """(B * windows, ws * ws, C) -> (B, H, W, C)."""
    c = windows.shape[-1]
    x = windows.reshape(-1, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(-1, h, w, c)


def relative_position_index(ws: int) -> torch.Tensor:
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(
        1
    )
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (ws - 1)
    return rel[..., 0] * (2 * ws - 1) + rel[..., 1]


def shifted_window_mask(h: int, w: int, ws: int, shift: int) -> torch.Tensor:
    """(windows, ws*ws, ws*ws) additive mask that keeps rolled-in regions apart."""
    region = torch.zeros(1, h, w, 1)
    cuts = (slice(0, -ws), slice(-ws, -shift), slice(-shift, None))
    label = 0
    for hs in cuts:
        for wsl in cuts:
            region[:, hs, wsl, :] = label
            label += 1
    ids = window_partition(region, ws).squeeze(-1)
    return (ids[:, None, :] != ids[:, :, None]).float() * -100.0


class WindowAttention(nn.Module):
    def __init__(self, dim: int, heads: int, ws: int) -> None:
        super().__init__()
        self.heads, self.ws = heads, ws
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(0.02 * torch.randn((2 * ws - 1) ** 2, heads))
        self.register_buffer("bias_index", relative_position_index(ws).flatten(), persistent=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        bw, n, c = x.shape
        qkv = self.qkv(x).reshape(bw, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q * self.scale) @ k.transpose(-2, -1)
        bias = self.bias_table[self.bias_index].reshape(n, n, self.heads).permute(2, 0, 1)
        attn = attn + bias[None]
        if mask is not None:
            windows = mask.shape[0]
            attn = attn.reshape(-1, windows, self.heads, n, n) + mask[None, :, None]
            attn = attn.reshape(-1, self.heads, n, n)
        out = attn.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(bw, n, c))


class SwinBlock(nn.Module):
    def __init__(self, dim: int, heads: int, resolution: int, ws: int, shift: int) -> None:
        super().__init__()
        self.resolution, self.ws, self.shift = resolution, ws, shift
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, heads, ws)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, 2 * dim)
        mask = shifted_window_mask(resolution, resolution, ws, shift) if shift else None
        self.register_buffer("attn_mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, length, c = x.shape
        r = self.resolution
        y = self.norm1(x).reshape(b, r, r, c)
        if self.shift:
            y = torch.roll(y, shifts=(-self.shift, -self.shift), dims=(1, 2))
        y = window_reverse(self.attn(window_partition(y, self.ws), self.attn_mask), self.ws, r, r)
        if self.shift:
            y = torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
        x = x + y.reshape(b, length, c)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, dim: int, resolution: int) -> None:
        super().__init__()
        self.resolution = resolution
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, c = x.shape
        x = x.reshape(b, self.resolution, self.resolution, c)
        parts = [x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]]
        x = torch.cat(parts, dim=-1).reshape(b, -1, 4 * c)
        return self.reduction(self.norm(x))


class SwinTiny(nn.Module):
    def __init__(self, image: int = 64, dim: int = 32, ws: int = 4, num_classes: int = 10) -> None:
        super().__init__()
        r = image // 4
        self.patch_embed = nn.Conv2d(3, dim, 4, 4)
        self.embed_norm = nn.LayerNorm(dim)
        self.stage1 = nn.Sequential(SwinBlock(dim, 2, r, ws, 0), SwinBlock(dim, 2, r, ws, ws // 2))
        self.merge = PatchMerging(dim, r)
        self.stage2 = nn.Sequential(
            SwinBlock(2 * dim, 4, r // 2, ws, 0), SwinBlock(2 * dim, 4, r // 2, ws, ws // 2)
        )
        self.norm = nn.LayerNorm(2 * dim)
        self.head = nn.Linear(2 * dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed_norm(self.patch_embed(x).flatten(2).transpose(1, 2))
        x = self.stage2(self.merge(self.stage1(x)))
        return self.head(self.norm(x).mean(dim=1))


def build() -> nn.Module:
    return SwinTiny()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="swin_tiny",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    # The shifted-window masks are precomputed for a 64x64 image: only the batch is dynamic.
    dynamic_shapes=({0: "batch"},),
    tags=("vision", "transformer", "attention", "windowed-attention"),
    description="Swin-style: window attention, relative position bias, shifted windows (torch.roll), patch merging",
)
