"""ViT (transformers ViTModel) from a tiny config: 32x32 images in 8x8 patches, CLS pooler."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import ModelSpec
from model_zoo.hf._adapter import REQUIRES, TINY


class Vit(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import ViTConfig, ViTModel

        config = ViTConfig(image_size=32, patch_size=8, num_channels=3, **TINY)
        self.model = ViTModel(config)

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.model(pixel_values=pixel_values, return_dict=False)


SPEC = ModelSpec(
    name="hf_vit",
    family="hf",
    build=Vit,
    example_inputs=lambda: (torch.randn(2, 3, 32, 32),),
    # Position embeddings are learned for 32x32: only the batch is dynamic.
    dynamic_shapes=({0: "batch"},),
    tags=("hf", "transformer", "vision"),
    requires=REQUIRES,
    description="transformers ViTModel, tiny config (32x32 images, 8x8 patches, hidden 64, 2 layers), random weights",
)
