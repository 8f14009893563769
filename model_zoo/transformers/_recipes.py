"""Input recipes without torch: the input names this suite generates, and what a recipe
(the ordered input names a model is called with) means for dynamic shapes and modality.
The zoo file reads these for every model type, so they stay free of torch and transformers."""

from __future__ import annotations

TOKEN_INPUTS = ("input_ids", "attention_mask", "token_type_ids", "bbox")  # bbox: layout models
DECODER_INPUTS = ("decoder_input_ids", "decoder_attention_mask")
GRID = "image_grid_thw"  # Qwen-VL-style models: each image's patches as (frames, rows, columns)
MM_TYPES = "mm_token_type_ids"  # and which of the text's tokens are an image's
SIZES = "image_sizes"  # Pixtral-style models: each image's (height, width)
VISION_INPUTS = ("pixel_values", GRID, SIZES, MM_TYPES)
AUDIO_INPUTS = ("input_values", "input_features")
LAYOUT = ("image_tokens", "choices", "eos")  # _inputs.Layout's fields, as inventories keep them
GENERATED = (*TOKEN_INPUTS, *DECODER_INPUTS, *VISION_INPUTS, *AUDIO_INPUTS)


def dynamic_axes(recipe: tuple[str, ...]) -> dict[str, dict[int, str]]:
    """The dynamic dimensions of each input (torch.export style): batch everywhere;
    sequence for text without images (image tokens fix the text's length); samples for
    raw audio. Images and audio features keep their size (learned position embeddings)."""
    with_images = "pixel_values" in recipe
    if GRID in recipe:
        return {name: {} for name in recipe}  # the batch moves every image's patch rows
    axes: dict[str, dict[int, str]] = {}
    for name in recipe:
        dims = {0: "batch"}
        if name in TOKEN_INPUTS and not with_images:
            dims[1] = "sequence"
        elif name in DECODER_INPUTS:
            dims[1] = "target"
        elif name == "input_values":
            dims[1] = "samples"
        axes[name] = dims
    return axes


def dynamic_shapes(recipe: tuple[str, ...]) -> tuple[dict[int, str], ...] | None:
    """One {axis: name} per positional input, aligned with the recipe."""
    if not recipe:
        return None
    axes = dynamic_axes(recipe)
    return tuple(axes[name] for name in recipe)


def modality(recipe: tuple[str, ...]) -> str:
    """text, vision, audio, or multimodal: what the model is fed."""
    kinds = {
        "text"
        if n in TOKEN_INPUTS + DECODER_INPUTS
        else "vision"
        if n in VISION_INPUTS
        else "audio"
        for n in recipe
    }
    return kinds.pop() if len(kinds) == 1 else "multimodal"
