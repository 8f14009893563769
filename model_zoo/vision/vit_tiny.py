"""Vision Transformer: patch-embedding conv, class token, learned position embedding, pre-norm blocks."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo._blocks import TransformerBlock


class ViTTiny(nn.Module):
    def __init__(
        self, image: int = 64, patch: int = 8, dim: int = 64, depth: int = 2, num_classes: int = 10
    ) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, dim))
        self.pos_embed = nn.Parameter(0.02 * torch.randn(1, (image // patch) ** 2 + 1, dim))
        self.blocks = nn.ModuleList(TransformerBlock(dim, heads=4) for _ in range(depth))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # (B, patches, dim)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x[:, 0]))


def build() -> nn.Module:
    return ViTTiny()


def example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 64, 64),)


SPEC = ModelSpec(
    name="vit_tiny",
    family="vision",
    build=build,
    example_inputs=example_inputs,
    # The learned position embedding fixes the number of patches: only the batch is dynamic.
    dynamic_shapes=({0: "batch"},),
    tags=("vision", "transformer", "attention"),
    description="ViT: 8x8 patch embedding, class token, learned positions, 2 pre-norm blocks",
)
