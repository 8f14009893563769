"""A generative entry eager cannot generate with (tests/cell/test_generation.py): its
language model's config names no vocabulary, so no prompt can be drawn. Its cell fails
before the export, at the reference stage, as eager's failure, not the exporter's."""

import types

import torch

from harness.zoo import ModelSpec


class NoVocabulary(torch.nn.Module):
    """A step around a `model` whose config has no `vocab_size`."""

    def __init__(self) -> None:
        super().__init__()
        self.model = torch.nn.Linear(4, 4)
        self.model.config = types.SimpleNamespace(hidden_size=4)  # type: ignore[assignment]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


SPECS = [
    ModelSpec(
        name="no_vocabulary",
        family="fixture",
        build=NoVocabulary,
        example_inputs=lambda: (torch.randn(2, 4),),
        dynamic_shapes=({0: "batch"},),
        metadata={"generation": {"mask_past": True}},
    )
]
