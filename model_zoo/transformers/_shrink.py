"""A model type's config from its class defaults, shrunk consistently (the `transformers` suite).

The defaults describe the released model (LLaMA's are 32 layers of width 4096). The shrink
keeps every structural choice (attention kind, grouped-query heads, experts, RoPE variant,
sub-configs of composite models) and makes each size small: layers, widths, heads and
head_dim, vocabulary, positions, images, audio features. It works on the config's dict and
builds the config again from it, so the config class's own checks and derived fields run
on the shrunk values: a shrink that breaks a rule of the architecture fails with that
rule's message, which becomes the skip reason.
"""

from __future__ import annotations

import re
from typing import Any, TypeGuard

LAYERS = 2
HIDDEN = 64
HEADS = 4
HEAD_DIM = HIDDEN // HEADS
INTERMEDIATE = 128
VOCAB = 512
# The top ids of the shrunk vocabulary hold the special tokens (pad, bos, eos, image...);
# generated token ids stay below them.
SPECIAL_IDS = 32
POSITIONS = 128
EXPERTS = 4
EXPERTS_PER_TOKEN = 2
CONV_CHANNELS = 32
MIN_IMAGE = 32
PATCHES_PER_SIDE = 4

_LAYER_COUNT = re.compile(
    r"(^|_)(num_hidden_layers|num_layers|n_layers?|layers|depth|num_blocks|"
    r"encoder_layers|decoder_layers|num_encoder_layers|num_decoder_layers)$"
)
# Layer counts that must match the length of a list beside them, or stay below others.
_NOT_LAYER_COUNTS = {
    "num_feat_extract_layers",
    "num_conv_layers",
    "num_kv_shared_layers",
    "max_window_layers",
    "num_nextn_predict_layers",
}
_WIDTH = re.compile(
    r"(^|_)(hidden_size|d_model|n_embd|embed_dim|hidden_dim|projection_dim|embedding_size|"
    r"embedding_dim|model_dim|emb_dim|upsample_initial_channel|true_hidden_size|"
    r"intra_bottleneck_size)$"
)
_FFN = re.compile(r"(^|_)(intermediate_size|ffn_dim|d_ff|n_inner|mlp_dim|ffn_hidden_size)$")
_HEADS = re.compile(r"(^|_)(num_attention_heads|n_heads?|num_heads|attention_heads)$")
_KV_HEADS = re.compile(r"(^|_)(num_key_value_heads|n_kv_heads|num_kv_heads)$")
_POSITIONS = re.compile(
    r"(^|_)(max_position_embeddings|n_positions|max_source_positions|max_target_positions|"
    r"original_max_position_embeddings)$"
)
_EXPERTS = re.compile(r"(^|_)(num_experts|n_routed_experts|num_local_experts|moe_num_experts)$")
_PER_TOKEN = re.compile(r"(^|_)(num_experts_per_tok|num_experts_per_token|moe_topk|moe_k)$")
_TOKEN_ID = re.compile(r"token_(id|index)$")
_CONV_LISTS = ("conv_dim", "tdnn_dim")
_MLA = {
    "q_lora_rank": 32,
    "kv_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "qk_head_dim": 16,
    "v_head_dim": 16,
}
_GROUPS = {"n_group": 1, "topk_group": 1, "first_k_dense_replace": 1, "num_kv_shared_layers": 0}


def default_config(model_type: str) -> Any:
    """The config class's defaults for `model_type` (transformers.CONFIG_MAPPING)."""
    from transformers import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]()


def shrunk_config(model_type: str) -> Any:
    """The model type's default config, shrunk, with no KV cache."""
    config = default_config(model_type)
    values = shrink(config.to_dict(), tokens={})
    return type(config).from_dict(values)


def shrink(values: dict[str, Any], *, tokens: dict[int, int]) -> dict[str, Any]:
    """A shrunk copy of a config dict, sub-configs included. `tokens` maps the special token
    ids seen so far to their new ids, shared by the sub-configs of one model."""
    out = dict(values)
    old_heads = out.get("num_attention_heads")
    for key, value in values.items():
        out[key] = _shrunk_value(key, value, values, tokens)
    _fill_missing(out)
    _fix_kv_heads(out, old_heads)
    _fix_stage_heads(out, values)
    _fix_mla(out, values)
    _fix_mamba(out)
    _fix_per_layer_lists(out, values.get("num_hidden_layers"), values.get("layer_types"))
    _fix_backbone_stages(out, values)
    _fix_axial_positions(out)
    _fix_images(out)
    if isinstance(out.get("rope_parameters"), dict):
        out["rope_parameters"] = _shrunk_rope(out["rope_parameters"], out)
    out["use_cache"] = False
    return out


def _shrunk_value(key: str, value: Any, values: dict[str, Any], tokens: dict[int, int]) -> Any:
    if isinstance(value, dict) and "model_type" in value:
        return shrink(value, tokens=tokens)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return _shrunk_int(key, value, values, tokens)
    if isinstance(value, list) and value and all(_is_int(v) for v in value):
        return _shrunk_list(key, value, tokens)
    return value


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _shrunk_int(key: str, value: int, values: dict[str, Any], tokens: dict[int, int]) -> int:
    if _TOKEN_ID.search(key):
        return _token(value, tokens)
    if key in _GROUPS:
        return min(value, _GROUPS[key])
    if key in _MLA:
        return min(value, _MLA[key])
    if key in ("head_dim", "rotary_dim"):
        return min(value, HEAD_DIM)
    if "vocab_size" in key and key != "type_vocab_size":
        return min(value, VOCAB)  # also per-layer and entity vocabularies (Gemma 3n, LUKE)
    rules: tuple[tuple[re.Pattern[str], int], ...] = (
        (_EXPERTS, EXPERTS),
        (_PER_TOKEN, EXPERTS_PER_TOKEN),
        (_POSITIONS, POSITIONS),
        (_FFN, INTERMEDIATE),
        (_WIDTH, HIDDEN),
    )
    for pattern, size in rules:
        if pattern.search(key):
            return min(value, size)
    if _HEADS.search(key):
        return _heads(value)
    if _LAYER_COUNT.search(key) and key not in _NOT_LAYER_COUNTS:
        return min(value, LAYERS)
    return value


def _heads(value: int) -> int:
    """1 stays 1, 2 or 3 become 2, more become HEADS: always a divisor of HIDDEN."""
    return 1 if value <= 1 else 2 if value < HEADS else HEADS


def _token(value: int, tokens: dict[int, int]) -> int:
    """Special token ids beyond the shrunk vocabulary move to its top ids, one per distinct id."""
    if value < VOCAB - SPECIAL_IDS:
        return value
    if value not in tokens:
        tokens[value] = VOCAB - 1 - (len(tokens) % SPECIAL_IDS)
    return tokens[value]


def _shrunk_list(key: str, value: list[int], tokens: dict[int, int]) -> list[int]:
    if _TOKEN_ID.search(key) or key in ("eos_token_id", "bos_token_id"):
        return [_token(v, tokens) for v in value]
    if key == "depths":
        return [min(v, LAYERS) for v in value]
    if key in _CONV_LISTS:
        return [min(v, CONV_CHANNELS) for v in value]
    if _FFN.search(key):
        return [min(v, INTERMEDIATE) for v in value]
    return value


# Sizes some config classes leave None by default, which their models cannot build with.
_MISSING = {
    "vocab_size": VOCAB,
    "num_experts_per_tok": EXPERTS_PER_TOKEN,
    "n_group": 1,
    "topk_group": 1,
}


def _fill_missing(out: dict[str, Any]) -> None:
    for key, value in _MISSING.items():
        if key in out and out[key] is None:
            out[key] = value
    # Defaults a released checkpoint's config always names: as many KV heads as query heads
    # (Nemotron's default config leaves it None, which its own attention cannot divide by);
    # the first language of a multilingual adapter model (X-MOD refuses to run without one).
    if "num_key_value_heads" in out and out["num_key_value_heads"] is None:
        out["num_key_value_heads"] = out.get("num_attention_heads")
    languages = out.get("languages")
    if "default_language" in out and out["default_language"] is None and languages:
        out["default_language"] = languages[0]
    heads, hidden = out.get("num_attention_heads"), out.get("hidden_size")
    unsized = "head_dim" in out and out["head_dim"] is None
    if unsized and _is_int(heads) and heads and _is_int(hidden):
        out["head_dim"] = hidden // heads


def _fix_mamba(out: dict[str, Any]) -> None:
    """Mamba-2 mixers: heads x head size is the expanded width (expand x hidden)."""
    heads, expand, hidden = (
        out.get("mamba_n_heads"),
        out.get("mamba_expand"),
        out.get("hidden_size"),
    )
    if _is_int(heads) and _is_int(expand) and _is_int(hidden) and "mamba_d_head" in out:
        out["mamba_d_head"] = expand * hidden // heads


def _fix_backbone_stages(out: dict[str, Any], values: dict[str, Any]) -> None:
    """A transformer used as a backbone names the layers it outputs (`out_indices`, as
    `stage<N>`): the shrunk one outputs its last layers, as many as the default did (and
    keeps at least that many layers)."""
    old_layers, layers = values.get("num_hidden_layers"), out.get("num_hidden_layers")
    indices = values.get("out_indices")
    if not (_is_int(old_layers) and _is_int(layers) and "stage_names" in values):
        return
    if layers == old_layers or not isinstance(indices, list) or not indices:
        return
    if not all(_is_int(i) and i <= old_layers for i in indices):
        return
    count = len(indices)
    layers = out["num_hidden_layers"] = max(layers, count)
    out["out_indices"] = list(range(layers - count + 1, layers + 1))
    out["out_features"] = [f"stage{i}" for i in out["out_indices"]]
    out["stage_names"] = ["stem", *(f"stage{i}" for i in range(1, layers + 1))]


def _fix_axial_positions(out: dict[str, Any]) -> None:
    """Reformer's axial position embeddings: their dims split the hidden size (in the
    default's proportions) and their shape's factors multiply to the positions."""
    dims, shape = out.get("axial_pos_embds_dim"), out.get("axial_pos_shape")
    if isinstance(dims, list) and _is_int(out.get("hidden_size")):
        out["axial_pos_embds_dim"] = split_sizes(out["hidden_size"], dims)
    positions = out.get("max_position_embeddings")
    if isinstance(shape, list) and len(shape) == 2 and _is_int(positions):
        rows = 1 << (positions.bit_length() - 1) // 2  # a power of two near the square root
        out["axial_pos_shape"] = [rows, positions // rows]


def _fix_kv_heads(out: dict[str, Any], old_heads: Any) -> None:
    """Grouped-query attention stays grouped: as many KV heads as query heads where the
    default had as many, one where it had one, otherwise 2."""
    heads = out.get("num_attention_heads")
    for key in [k for k in out if _KV_HEADS.search(k)]:
        old = out[key]
        if not _is_int(old) or not _is_int(heads):
            continue
        if old == old_heads:
            out[key] = heads
        elif old == 1:
            out[key] = 1
        else:
            out[key] = min(2, heads)


def _fix_stage_heads(out: dict[str, Any], values: dict[str, Any]) -> None:
    """Hierarchical vision models (Swin and kin) give each stage its own head count and
    double the width per stage: heads become 1, 2, 4, ... in the same proportions, the
    first stage 32 wide (one head of 32), and a derived `hidden_size` (the last stage's
    width) follows."""
    for key in ("num_heads", "num_attention_heads"):
        heads = values.get(key)
        if not (isinstance(heads, list) and heads and all(_is_int(h) and h > 0 for h in heads)):
            continue
        out[key] = [max(1, h // heads[0]) for h in heads]
        embed = values.get("embed_dim")
        if _is_int(embed):
            out["embed_dim"] = 2 * HEAD_DIM * out[key][0]
            depths = values.get("depths")
            stages = len(depths) if isinstance(depths, list) else len(heads)
            if values.get("hidden_size") == embed * 2 ** (stages - 1):
                out["hidden_size"] = out["embed_dim"] * 2 ** (stages - 1)


def _fix_mla(out: dict[str, Any], values: dict[str, Any]) -> None:
    """Multi-head latent attention (DeepSeek): RoPE runs on qk_rope_head_dim, which the
    config also calls head_dim; qk_head_dim is the nope and rope parts together."""
    if not _is_int(out.get("qk_rope_head_dim")):
        return
    if values.get("head_dim") == values.get("qk_rope_head_dim"):
        out["head_dim"] = out["qk_rope_head_dim"]
    if _is_int(out.get("qk_nope_head_dim")) and "qk_head_dim" in out:
        out["qk_head_dim"] = out["qk_nope_head_dim"] + out["qk_rope_head_dim"]


def _fix_per_layer_lists(out: dict[str, Any], old_layers: Any, old_types: Any) -> None:
    """Lists with one item per layer (layer_types, per-layer sizes) follow the shrunk layer
    count; lists of layer indices keep the indices that still exist."""
    layers = out.get("num_hidden_layers")
    if not _is_int(layers) or not _is_int(old_layers) or layers == old_layers:
        return
    for key, value in out.items():
        if not isinstance(value, list) or key in ("depths",):
            continue
        if len(value) == old_layers:
            out[key] = _keep_variety(value, layers) if key.endswith("types") else value[:layers]
        elif key.endswith(("_layers", "_indexes", "_indices")) and all(_is_int(v) for v in value):
            kept = [v for v in value if 0 <= v < layers]
            out[key] = kept or ([layers - 1] if value else [])
    if isinstance(out.get("per_layer_config"), dict):
        out["per_layer_config"] = _per_layer_config(out, old_types)


def _per_layer_config(out: dict[str, Any], old_types: Any) -> dict[str, Any]:
    """Per-layer overrides (Gemma 4: a larger head_dim on full-attention layers), keyed by
    layer index: the shrunk layers of a kind get the shrunk overrides of that kind."""
    config: dict[str, Any] = out["per_layer_config"]
    types = out.get("layer_types")
    if not isinstance(types, list) or not isinstance(old_types, list):
        return {k: v for k, v in config.items() if int(k) < out["num_hidden_layers"]}
    width = len(next(iter(config), "0"))
    by_kind = {old_types[int(k)]: v for k, v in config.items() if int(k) < len(old_types)}
    return {
        str(i).zfill(width): shrink_sizes(by_kind[kind])
        for i, kind in enumerate(types)
        if kind in by_kind
    }


def shrink_sizes(values: dict[str, Any]) -> dict[str, Any]:
    """The size rules alone, on a dict that is not a config (per-layer overrides)."""
    return {k: _shrunk_int(k, v, values, {}) if _is_int(v) else v for k, v in values.items()}


def _keep_variety(kinds: list[Any], n: int) -> list[Any]:
    """The first n layer kinds, but with every kind of the full list where n allows
    (a hybrid model keeps both its attention and its recurrent layers)."""
    distinct = list(dict.fromkeys(kinds))
    if len(distinct) <= n:
        return distinct + kinds[len(distinct) : n] if n > len(distinct) else distinct
    return kinds[:n]


def _fix_images(out: dict[str, Any]) -> None:
    """Images of a few patches per side (at least MIN_IMAGE pixels), never larger than
    the default. Hierarchical models with windows (Swin and kin) keep theirs: each stage
    halves the resolution, and their windows must still fit the last one (seen here:
    Swin at 32x32 with a window of 4 fails in transformers' own code)."""
    if isinstance(out.get("depths"), list) and "window_size" in out:
        return
    size = out.get("image_size")
    patch = out.get("patch_size")
    per_side = patch * PATCHES_PER_SIDE if _is_int(patch) else MIN_IMAGE
    target = max(per_side, MIN_IMAGE)
    if _is_int(size):
        out["image_size"] = min(size, target)
    elif isinstance(size, list) and len(size) == 2 and all(_is_int(s) for s in size):
        out["image_size"] = [min(s, target) for s in size]


def _shrunk_rope(rope: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """RoPE parameters sized by the head dimension follow the shrunk one."""
    rope = dict(rope)
    head_dim = _head_dim(out)
    half = head_dim // 2
    section = rope.get("mrope_section")
    if isinstance(section, list) and section and sum(section) != half:
        rope["mrope_section"] = split_sizes(half, section)
    for key in ("short_factor", "long_factor"):
        if isinstance(rope.get(key), list) and len(rope[key]) != half:
            rope[key] = (rope[key] * half)[:half]
    for key in ("original_max_position_embeddings",):
        if _is_int(rope.get(key)):
            rope[key] = min(rope[key], POSITIONS)
    return rope


def _head_dim(out: dict[str, Any]) -> int:
    if _is_int(out.get("head_dim")):
        return int(out["head_dim"])
    hidden, heads = out.get("hidden_size"), out.get("num_attention_heads")
    if _is_int(hidden) and _is_int(heads) and heads:
        return int(hidden // heads)
    return HEAD_DIM


def split_sizes(total: int, parts: list[int]) -> list[int]:
    """`total` split in len(parts) integer parts in the proportions of `parts`."""
    weight = sum(parts)
    split = [max(1, total * p // weight) for p in parts]
    split[0] += total - sum(split)
    return split
