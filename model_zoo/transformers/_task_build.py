"""The model a `transformers-tasks` entry exports: a type's head class built from the shrunk
config (the sub-config the class takes, where the type's config is composite and the head
is built from one part), random weights, eval mode, behind the same wrapper as the
`transformers` suite's (keyword inputs, a flat tuple of output tensors)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from model_zoo.transformers._build import model_class, offline, start_decoding_as_checkpoints_do
from model_zoo.transformers._shrink import shrink, shrunk_config, split_sizes

CAUSAL_LM = "causal-lm"


def head_config(model_type: str, class_name: str, tasks: Sequence[str] = ()) -> Any:
    """The shrunk config `class_name` is built from, set up as a user sets it up for the
    head's tasks."""
    config = _without_timm(shrunk_config(model_type))
    _size_mrope(_text(config))
    wanted = getattr(model_class(class_name), "config_class", None)
    if wanted is not None and not isinstance(config, wanted) and hasattr(config, "get_text_config"):
        text = config.get_text_config()
        config = text if isinstance(text, wanted) else config
    if class_name.endswith("ForSequenceClassification"):
        _pad_for_batches(config)
    if CAUSAL_LM in tasks and not getattr(config, "is_encoder_decoder", False):
        # An encoder's causal-LM head (BERT's) attends causally only in its decoder mode,
        # which transformers asks a user to set (`is_decoder=True`), as the decode suite does.
        config.is_decoder = True
    return config


def _text(config: Any) -> Any:
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _pad_for_batches(config: Any) -> None:
    """A sequence classifier of a decoder model needs a pad token to batch (transformers
    refuses a batch of 2 without one, and says to set it): where the config has none, the
    last id of its vocabulary is the pad, which generated inputs never hold."""
    text = _text(config)
    vocab = getattr(text, "vocab_size", None)
    if getattr(text, "pad_token_id", 0) is None and isinstance(vocab, int):
        text.pad_token_id = config.pad_token_id = vocab - 1


def _without_timm(config: Any) -> Any:
    """A detector whose default backbone is timm's (DETR's ResNet-50; timm is not
    installed here) gets transformers' own ResNet of the same four stages, shrunk: what
    `use_timm_backbone=False` gives a user."""
    backbone = getattr(config, "backbone_config", None)
    if getattr(backbone, "model_type", None) != "timm_backbone":
        return config
    from transformers import ResNetConfig

    stages = [f"stage{i}" for i in backbone.out_indices or (1, 2, 3, 4)]
    resnet = shrink(ResNetConfig(out_features=stages).to_dict(), tokens={})
    return type(config).from_dict({**config.to_dict(), "backbone_config": resnet})


def _size_mrope(text: Any) -> None:
    """Multimodal RoPE (Qwen2-VL, GLM-4V) splits each head's rotary half in three sections
    (time, height, width). Released checkpoints name them in their config; the config
    class's defaults do not, and the model code's default ([16, 24, 24]) fits only the full
    head size: the shrunk head gets sections in the same 2:3:3 proportions."""
    rope = getattr(text, "rope_parameters", None)
    uses_mrope = "mrope_section" in getattr(type(text), "ignore_keys_at_rope_validation", ())
    if not uses_mrope or not isinstance(rope, dict) or "mrope_section" in rope:
        return
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    rope["mrope_section"] = split_sizes(head_dim // 2, [2, 3, 3])


def build_head(model_type: str, class_name: str, tasks: Sequence[str] = ()) -> torch.nn.Module:
    """The head in eval mode, random weights (seeded by the caller), float32."""
    offline()
    import transformers

    transformers.logging.set_verbosity_error()
    model = model_class(class_name)(head_config(model_type, class_name, tasks)).eval()
    start_decoding_as_checkpoints_do(model)
    return model
