"""GPT-style decoder step with a KV cache passed in as tensors and returned updated (past_len dynamic)."""

from __future__ import annotations

import math

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec
from model_zoo._blocks import Mlp, causal_bias

VOCAB, DIM, HEADS, LAYERS, MAX_POSITIONS = 1000, 64, 4, 2, 64
HEAD_DIM = DIM // HEADS


class CachedBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.norm2 = nn.LayerNorm(DIM)
        self.mlp = Mlp(DIM, 4 * DIM)

    def forward(
        self, x: torch.Tensor, past_k: torch.Tensor, past_v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, t, 3, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4)
        k = torch.cat([past_k, k], dim=2)  # (b, heads, past + t, head_dim)
        v = torch.cat([past_v, v], dim=2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM) + causal_bias(t, k.shape[2], x)
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, DIM)
        x = x + self.proj(out)
        return x + self.mlp(self.norm2(x)), k, v


class GPTKVCache(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(MAX_POSITIONS, DIM)
        self.blocks = nn.ModuleList(CachedBlock() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(
        self, input_ids: torch.Tensor, past_keys: torch.Tensor, past_values: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """past_keys/past_values: (batch, layers, heads, past_len, head_dim)."""
        past, t = past_keys.shape[3], input_ids.shape[1]
        positions = torch.arange(past, past + t, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(positions)[None]
        keys, values = [], []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, past_keys[:, i], past_values[:, i])
            keys.append(k)
            values.append(v)
        return self.lm_head(self.norm(x)), torch.stack(keys, dim=1), torch.stack(values, dim=1)


def build() -> nn.Module:
    return GPTKVCache()


def example_inputs() -> tuple[torch.Tensor, ...]:
    input_ids = torch.randint(0, VOCAB, (2, 4))
    past_keys = torch.randn(2, LAYERS, HEADS, 12, HEAD_DIM)
    past_values = torch.randn(2, LAYERS, HEADS, 12, HEAD_DIM)
    return input_ids, past_keys, past_values


SPEC = ModelSpec(
    name="gpt_kv_cache",
    family="nlp",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=(
        {0: "batch", 1: "sequence"},
        {0: "batch", 3: "past_sequence"},
        {0: "batch", 3: "past_sequence"},
    ),
    tags=("nlp", "transformer", "attention", "decoder", "causal", "kv-cache", "int64-inputs"),
    description="GPT-style decoder step: KV cache as inputs, concatenated and returned as outputs",
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
