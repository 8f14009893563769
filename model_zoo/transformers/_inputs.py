"""Example inputs for a transformers model, generated from its forward's input names and its
(shrunk) config: token ids and attention masks, pixel values, raw audio, audio features,
decoder ids, and the image tokens a vision-language model's text must hold.

Each input name has one generator. A *recipe* is the ordered tuple of names a model is
called with; the probe (_probe.py) tries the recipes `candidate_recipes` proposes and the
inventory keeps the first one the model runs with in eager.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from model_zoo.transformers._recipes import (
    AUDIO_INPUTS,
    DECODER_INPUTS,
    GENERATED,
    GRID,
    MM_TYPES,
    SIZES,
    VISION_INPUTS,
)
from model_zoo.transformers._shrink import PATCHES_PER_SIDE, SPECIAL_IDS

BATCH = 2
SEQUENCE = 16
TARGET = 8
AUDIO_FRAMES = 64  # per conv stride of raw-audio models
FRAMES = 128  # audio feature frames where the config does not fix them
CHOICES = 3  # a multiple-choice head's answers per question
BOX_RANGE = 1000  # layout models' coordinates: 0..1000, as their processors normalise them


def forward_parameters(model: Any) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(model.forward).parameters)


def candidate_recipes(model: Any) -> list[tuple[str, ...]]:
    """The input sets worth trying, richest first: every generated input the forward takes
    and the config can feed (images with text for a vision-language model), then the main
    input with its mask and decoder ids, then the main input alone."""
    params = forward_parameters(model)
    main = getattr(model, "main_input_name", "input_ids")
    config = model.config
    full = [main]
    if main == "input_ids":
        full += [n for n in ("attention_mask", "bbox") if n in params]
        if _vision(config) and "pixel_values" in params:
            full += ["pixel_values", *(n for n in (GRID, SIZES, MM_TYPES) if n in params)]
    if main in ("pixel_values", *AUDIO_INPUTS) and "input_ids" in params and _text(config):
        full += ["input_ids", *(n for n in ("attention_mask",) if n in params)]
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        full.append("decoder_input_ids")
    recipes = [tuple(full)]
    text_only = tuple(n for n in full if n not in VISION_INPUTS) if main != "pixel_values" else ()
    # A head that makes its decoder's inputs from the encoder's (BART's classifiers).
    encoder_only = tuple(n for n in text_only if n not in DECODER_INPUTS)
    main_only = tuple(n for n in full if n in (main, "decoder_input_ids"))
    for recipe in (text_only, encoder_only, main_only, (main,)):
        if recipe not in recipes:
            recipes.append(recipe)
    return [r for r in recipes if r and all(n in GENERATED for n in r)]


def _vision(config: Any) -> bool:
    return hasattr(config, "vision_config") or hasattr(config, "image_size")


def _text(config: Any) -> bool:
    return hasattr(config, "text_config") or hasattr(config, "vocab_size")


# -- generation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How a recipe's inputs are laid out beyond their names: the image tokens the text
    holds per image (`image_feature_count`, found by the probe) and, for a multiple-choice
    head, the answers per question (token inputs become (batch, choices, sequence))."""

    image_tokens: int = 0
    choices: int = 0
    # The position of the end-of-sentence token in every row of the text, where the head
    # reads it there (BART-like sequence classifiers take the hidden state at each row's
    # eos, and refuse rows without one); 0: none.
    eos: int = 0


def generate(
    config: Any, recipe: tuple[str, ...], *, image_tokens: int = 0, choices: int = 0, eos: int = 0
) -> tuple[torch.Tensor, ...]:
    """The recipe's inputs for a model of `config`, in the recipe's order (call under a
    seed)."""
    layout = Layout(image_tokens, choices, eos)
    values: dict[str, torch.Tensor] = {}
    for name in recipe:
        if name not in values:
            values.update(_GENERATORS[name](config, recipe, layout))
    return tuple(values[name] for name in recipe)


def _input_ids(config: Any, recipe: tuple[str, ...], layout: Layout) -> dict[str, torch.Tensor]:
    rows = (BATCH, layout.choices) if layout.choices else (BATCH,)
    ids = token_ids(config, (*rows, SEQUENCE))
    if "pixel_values" in recipe:
        ids = _with_image_tokens(config, ids, layout.image_tokens)
    if layout.eos:
        ids[..., layout.eos] = config.eos_token_id
    mask = torch.ones_like(ids)
    if "pixel_values" not in recipe:
        mask[1, ..., SEQUENCE * 3 // 4 :] = 0  # padding at the end of the second row
    # Qwen-VL-style models: which tokens are an image's (1) and which text (0).
    token = image_token(config)
    modality = (ids == token).long() if token is not None else torch.zeros_like(ids)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "token_type_ids": torch.zeros_like(ids),
        MM_TYPES: modality,
    }


def _boxes(config: Any, recipe: tuple[str, ...], layout: Layout) -> dict[str, torch.Tensor]:
    """A layout model's word boxes (batch, sequence, 4): x0 <= x1 and y0 <= y1 in 0..1000."""
    corner = torch.randint(0, BOX_RANGE // 2, (BATCH, SEQUENCE, 2))
    size = torch.randint(0, BOX_RANGE // 2, (BATCH, SEQUENCE, 2))
    return {"bbox": torch.cat([corner, corner + size], dim=-1)}


def token_ids(config: Any, shape: tuple[int, ...]) -> torch.Tensor:
    """Random ids below the special tokens of the (text) vocabulary."""
    vocab = _vocab(config)
    high = vocab - SPECIAL_IDS if vocab > 2 * SPECIAL_IDS else vocab
    return torch.randint(0, max(high, 2), shape)


def _vocab(config: Any) -> int:
    for holder in (config, getattr(config, "text_config", None), getattr(config, "decoder", None)):
        vocab = getattr(holder, "vocab_size", None)
        if isinstance(vocab, int) and vocab > 1:
            return vocab
    return 2


def image_token(config: Any) -> int | None:
    for key in ("image_token_id", "image_token_index"):
        value = getattr(config, key, None)
        if isinstance(value, int):
            return value
    return None


def _with_image_tokens(config: Any, ids: torch.Tensor, count: int) -> torch.Tensor:
    """Text that holds one image's worth of image tokens per row, as the processor would
    write it."""
    token = image_token(config)
    if token is None or count <= 0:
        return ids
    image = torch.full((ids.shape[0], count), token, dtype=ids.dtype)
    return torch.cat([ids[:, :2], image, ids[:, 2:]], dim=1)


def image_feature_count(model: Any, recipe: tuple[str, ...] = ("pixel_values",)) -> int:
    """How many features the model's vision tower gives for one image: the image tokens
    its text must hold."""
    vision = _vision_inputs(model.config, recipe, batch=1)
    with torch.no_grad():
        features = model.get_image_features(**vision)
    if isinstance(features, tuple | list):
        features = features[0]
    if hasattr(features, "pooler_output") and not isinstance(features, torch.Tensor):
        features = features.pooler_output if features.pooler_output is not None else features[0]
    if isinstance(features, tuple | list):
        features = torch.cat([f.reshape(-1, f.shape[-1]) for f in features])
    return int(features.reshape(-1, features.shape[-1]).shape[0])


def _decoder_ids(config: Any, recipe: tuple[str, ...], layout: Layout) -> dict[str, torch.Tensor]:
    ids = token_ids(config, (BATCH, TARGET))
    return {"decoder_input_ids": ids, "decoder_attention_mask": torch.ones_like(ids)}


def _vision_config(config: Any) -> Any:
    return getattr(config, "vision_config", None) or config


def pixel_values(config: Any, *, batch: int = BATCH) -> torch.Tensor:
    """(batch, channels, height, width); video models (a `num_frames` config) get
    (batch, frames, channels, height, width)."""
    vision = _vision_config(config)
    size = getattr(vision, "image_size", 32)
    height, width = (size, size) if isinstance(size, int) else tuple(size)[:2]
    channels = getattr(vision, "num_channels", 3) or 3
    frames = getattr(vision, "num_frames", None)
    if isinstance(frames, int) and frames > 0:
        return torch.randn(batch, frames, channels, height, width)
    return torch.randn(batch, channels, height, width)


def _pixels(config: Any, recipe: tuple[str, ...], layout: Layout) -> dict[str, torch.Tensor]:
    return _vision_inputs(config, recipe, batch=BATCH)


def _vision_inputs(config: Any, recipe: tuple[str, ...], *, batch: int) -> dict[str, torch.Tensor]:
    if GRID in recipe:
        return grid_pixels(config, batch=batch)
    pixels = pixel_values(config, batch=batch)
    if SIZES not in recipe:
        return {"pixel_values": pixels}
    # Pixtral-style models: each image's (height, width) within its padded pixels.
    return {"pixel_values": pixels, SIZES: torch.tensor([list(pixels.shape[-2:])] * batch)}


def grid_patches(config: Any) -> int:
    """Patches a side of one image in a grid model's input: the shrunk images' 4, made a
    multiple of how many patches a side the vision tower merges into one token."""
    merge = getattr(_vision_config(config), "spatial_merge_size", 1) or 1
    return -(-PATCHES_PER_SIDE // merge) * merge


def grid_pixels(config: Any, *, batch: int = BATCH) -> dict[str, torch.Tensor]:
    """Images as Qwen-VL-style processors give them: every image's patches flattened into
    rows of (channels x temporal patch x patch x patch) values, all images' rows stacked,
    and each image's (frames, rows, columns) of patches in `image_grid_thw`."""
    vision = _vision_config(config)
    side = grid_patches(config)
    channels = getattr(vision, "in_channels", None) or getattr(vision, "num_channels", None) or 3
    temporal = getattr(vision, "temporal_patch_size", None) or 1
    patch = vision.patch_size
    rows = torch.randn(batch * side * side, channels * temporal * patch * patch)
    return {"pixel_values": rows, GRID: torch.tensor([[1, side, side]] * batch)}


def audio_config(config: Any) -> Any:
    return getattr(config, "audio_config", None) or getattr(config, "encoder", None) or config


def _input_values(config: Any, recipe: tuple[str, ...], layout: Layout) -> dict[str, torch.Tensor]:
    audio = audio_config(config)
    ratio = 1
    for stride in getattr(audio, "conv_stride", None) or (320,):
        ratio *= stride
    return {"input_values": torch.randn(BATCH, ratio * AUDIO_FRAMES)}


def _input_features(
    config: Any, recipe: tuple[str, ...], layout: Layout
) -> dict[str, torch.Tensor]:
    """(batch, mel bins, frames) for Whisper-like encoders, whose frames are fixed at twice
    max_source_positions; (batch, frames, features) for the others."""
    audio = audio_config(config)
    mels = getattr(audio, "num_mel_bins", None)
    if isinstance(mels, int):
        positions = getattr(audio, "max_source_positions", None)
        frames = 2 * positions if isinstance(positions, int) else FRAMES
        return {"input_features": torch.randn(BATCH, mels, frames)}
    features = _feature_size(audio)
    return {"input_features": torch.randn(BATCH, FRAMES, features)}


def _feature_size(audio: Any) -> int:
    for key in ("input_feat_per_channel", "feature_size", "num_mel_bins", "input_dim"):
        value = getattr(audio, key, None)
        if isinstance(value, int) and value > 0:
            channels = getattr(audio, "input_channels", 1)
            return value * (channels if isinstance(channels, int) else 1)
    return 80


_GENERATORS: dict[str, Callable[[Any, tuple[str, ...], Layout], dict[str, torch.Tensor]]] = {
    "input_ids": _input_ids,
    "bbox": _boxes,
    "attention_mask": _input_ids,
    "token_type_ids": _input_ids,
    MM_TYPES: _input_ids,
    "decoder_input_ids": _decoder_ids,
    "decoder_attention_mask": _decoder_ids,
    "pixel_values": _pixels,
    GRID: _pixels,
    SIZES: _pixels,
    "input_values": _input_values,
    "input_features": _input_features,
}
