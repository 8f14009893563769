"""The architecture of tests/test_checkpoints.py's saved checkpoint, built from its config
under the harness's seed: the same weights the checkpoint holds (the test saved a model
built the same way), for a run that compares the two entries."""

from __future__ import annotations

from typing import Any

import torch

from harness.zoo import ModelSpec

CONFIG = {"vocab_size": 200, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 4, "intermediate_size": 64, "num_labels": 3}  # fmt: skip


def built() -> Any:
    import transformers

    return transformers.BertForSequenceClassification(transformers.BertConfig(**CONFIG)).eval()


def _wrapped() -> torch.nn.Module:
    from model_zoo.transformers._build import exportable

    return exportable(built(), ("input_ids", "attention_mask"))


def _inputs() -> tuple[torch.Tensor, ...]:
    import transformers

    from model_zoo.transformers._inputs import generate

    return generate(transformers.BertConfig(**CONFIG), ("input_ids", "attention_mask"))


SPEC = ModelSpec(
    name="bert_from_config",
    family="seed",
    build=_wrapped,
    example_inputs=_inputs,
    input_names=("input_ids", "attention_mask"),
    dynamic_shapes=({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"}),
    requires=("transformers",),
)
