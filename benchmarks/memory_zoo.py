"""Models whose export needs tens to hundreds of MiB, for the memory fidelity benchmark.
The built-in zoo's models export in 2-20 MiB, where a few MiB of allocator reuse and
first-use initialisation are a quarter of the figure; these are sized so the figure is
what a memory regression alert (floor: 20% and 32 MiB) would act on."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec


def _mlp() -> torch.nn.Module:  # 8 x 2048 x 2048 weights: 128 MiB
    layers: list[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Linear(2048, 2048), torch.nn.GELU()]
    return torch.nn.Sequential(*layers)


def _convnet() -> torch.nn.Module:  # 6 x 512 x 512 x 3 x 3 weights: 54 MiB
    layers: list[torch.nn.Module] = [torch.nn.Conv2d(3, 512, 3, padding=1)]
    for _ in range(6):
        layers += [
            torch.nn.Conv2d(512, 512, 3, padding=1),
            torch.nn.BatchNorm2d(512),
            torch.nn.ReLU(),
        ]
    return torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())


class EmbeddingEncoder(torch.nn.Module):  # 40 000 x 512 embedding + 2 layers: ~90 MiB
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(40_000, 512)
        layer = torch.nn.TransformerEncoderLayer(512, 8, 2048, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.embed(ids))


SPECS = [
    ModelSpec(
        name="mem_mlp",
        family="seed",
        build=_mlp,
        example_inputs=lambda: (torch.randn(4, 2048),),
        tolerance=(1e-3, 1e-4),
    ),
    ModelSpec(
        name="mem_convnet",
        family="vision",
        build=_convnet,
        example_inputs=lambda: (torch.randn(1, 3, 16, 16),),
        tolerance=(1e-3, 1e-3),
    ),
    ModelSpec(
        name="mem_embedding_encoder",
        family="nlp",
        build=EmbeddingEncoder,
        example_inputs=lambda: (torch.randint(0, 40_000, (2, 32)),),
        tolerance=(1e-3, 1e-4),
    ),
]
