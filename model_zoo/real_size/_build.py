"""A real-size entry's model and inputs (models.py names them): the checkpoint's published
config read by transformers' own config class, its head built from it with random weights
(transformers' initialisation, under the caller's seed), and inputs of the entry's shapes."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from model_zoo.transformers._build import exportable, offline, start_decoding_as_checkpoints_do

TOKENS = ("input_ids", "decoder_input_ids")
ONES = ("attention_mask", "pixel_mask")


def config_of(entry: dict[str, Any]) -> Any:
    """The config as `from_pretrained` would read the checkpoint's config.json."""
    offline()
    import transformers

    transformers.logging.set_verbosity_error()
    values = {k: v for k, v in entry["config"].items() if k != "model_type"}
    return transformers.AutoConfig.for_model(entry["model_type"], **values)


def build(entry: dict[str, Any]) -> torch.nn.Module:
    """The head in eval mode, float32, behind the keyword wrapper (a flat tuple of outputs)."""
    import transformers

    head = getattr(transformers, entry["head_class"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = head(config_of(entry)).eval()
    start_decoding_as_checkpoints_do(model)
    return exportable(model, tuple(entry["inputs"]))


def example_inputs(entry: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """Inputs of the entry's shapes: token ids uniform over the vocabulary, masks of ones,
    token types zeros, images and audio standard normal (call under a seed)."""
    vocab = _vocab(config_of(entry))
    made = []
    for name, shape in entry["inputs"].items():
        if name in TOKENS:
            made.append(torch.randint(0, vocab, tuple(shape), dtype=torch.int64))
        elif name in ONES:
            made.append(torch.ones(tuple(shape), dtype=torch.int64))
        elif name == "token_type_ids":
            made.append(torch.zeros(tuple(shape), dtype=torch.int64))
        else:
            made.append(torch.randn(tuple(shape)))
    return tuple(made)


def _vocab(config: Any) -> int:
    for c in (config, getattr(config, "text_config", None), getattr(config, "decoder", None)):
        size = getattr(c, "vocab_size", None)
        if isinstance(size, int) and size > 0:
            return size
    return 2  # no token input: unused
