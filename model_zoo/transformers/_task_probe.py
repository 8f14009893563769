"""Does a task head build from its shrunk config and run in eager, and at which dynamic
dimensions? The probe answers for one (model type, head class) with the facts the tasks
inventory keeps: the inputs it runs with (recipe), their layout (image tokens, choices)
and dynamic dimensions, or the reason it does not (stage: config, build, inputs, eager).

A dimension is declared dynamic only where the head runs in eager at the second shape a
dynamic cell is verified at (`harness.cell.shapes.second_shape`: batch 1, the others half
their size): a ViT's image size does not move (learned position embeddings), a ConvNet's
does. It builds as a cell does (seed 0 before the model and before the inputs, eval mode,
the same wrapper), so what the inventory says builds, builds in the worker.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from harness.cell.shapes import Inputs, second_shape
from model_zoo.transformers._build import exportable, offline
from model_zoo.transformers._inputs import (
    CHOICES,
    SEQUENCE,
    audio_config,
    candidate_recipes,
    generate,
    grid_patches,
)
from model_zoo.transformers._probe import SEED, failure_entry, try_recipe
from model_zoo.transformers._recipes import DECODER_INPUTS, GENERATED, GRID, LAYOUT, TOKEN_INPUTS
from model_zoo.transformers._task_build import build_head, head_config

MULTIPLE_CHOICE = "multiple-choice"
# A grid model's patch rows (every image's, stacked) move with the batch.
PATCHES = "patches"
# Where an encoder-decoder classifier's text has its end-of-sentence token: inside the half
# of the sequence the second shape keeps.
EOS = SEQUENCE // 2 - 1


def _reads_eos(config: Any, tasks: list[str]) -> bool:
    """An encoder-decoder sequence classifier (BART's) classifies at each row's eos token."""
    encoder_decoder = getattr(config, "is_encoder_decoder", False)
    return (
        encoder_decoder and "sequence-classification" in tasks and config.eos_token_id is not None
    )


def probe(model_type: str, class_name: str, tasks: list[str]) -> dict[str, Any]:
    """The tasks inventory entry of one head: facts, or {"stage", "reason"}."""
    offline()
    try:
        config = head_config(model_type, class_name, tasks)
    except Exception as exc:
        return failure_entry("config", exc)
    try:
        torch.manual_seed(SEED)
        model = build_head(model_type, class_name, tasks)
    except Exception as exc:
        return failure_entry("build", exc)
    missing = missing_inputs(model)
    if missing:
        return {"stage": "inputs", "reason": f"needs input {missing[0]!r}, which no recipe makes"}
    choices = CHOICES if MULTIPLE_CHOICE in tasks else 0
    eos = EOS if _reads_eos(config, tasks) else 0
    recipes = candidate_recipes(model)
    failure: dict[str, Any] | None = None
    for recipe in recipes:
        entry = try_recipe(model, recipe, choices=choices, eos=eos)
        if "reason" not in entry:
            return {
                **entry,
                **_facts(model, config, recipe, entry),
                **_dropped(recipes[0], recipe, failure),
            }
        failure = failure or entry
    return failure or {"stage": "inputs", "reason": "no input this suite generates"}


def _facts(
    model: torch.nn.Module, config: Any, recipe: tuple[str, ...], entry: dict[str, Any]
) -> dict[str, Any]:
    dims, sizes = dynamic_dims(model, config, recipe, entry)
    parameters = sum(p.numel() for p in model.parameters())
    return {"dims": dims, **({"sizes": sizes} if sizes else {}), "parameters": parameters}


def _dropped(
    richest: tuple[str, ...], recipe: tuple[str, ...], failure: dict[str, Any] | None
) -> dict[str, Any]:
    """The inputs of the richest recipe the head runs without (a vision-language model run
    on text alone), and why it did not run with them: said, never silent."""
    dropped = [n for n in richest if n not in recipe]
    if not dropped or failure is None:
        return {}
    return {"dropped": dropped, "dropped_because": f"{failure['stage']}: {failure['reason']}"}


def missing_inputs(model: torch.nn.Module) -> list[str]:
    """The forward's required inputs (no default) that no generator makes."""
    params = inspect.signature(model.forward).parameters.values()
    return [
        p.name
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in GENERATED
    ]


def candidate_dims(
    recipe: tuple[str, ...], entry: dict[str, Any], config: Any
) -> dict[str, dict[int, str]]:
    """The dimensions each input could take dynamically: the batch everywhere; the
    sequence of text (not where image tokens fix it), and a multiple-choice head's answers;
    the target of decoder inputs; the samples of raw audio; the frames of audio features
    (not Whisper's, fixed at twice its source positions); an image's height and width."""
    with_image_tokens = bool(entry.get("image_tokens"))
    dims: dict[str, dict[int, str]] = {}
    for name in recipe:
        axes = {0: "batch"}
        if name in TOKEN_INPUTS and not with_image_tokens:
            axes |= {1: "choices", 2: "sequence"} if entry.get("choices") else {1: "sequence"}
        elif name in DECODER_INPUTS:
            axes[1] = "target"
        elif name == "input_values":
            axes[1] = "samples"
        elif name == "input_features":
            axes |= _frames_axis(config)
        elif name == "pixel_values" and GRID in recipe:
            axes = {0: PATCHES}
        elif name == "pixel_values" and not with_image_tokens:
            axes |= {-2: "height", -1: "width"}
        dims[name] = axes
    return dims


def _frames_axis(config: Any) -> dict[int, str]:
    """Audio features are (batch, mels, frames) where the config has mel bins (none where
    it fixes the frames at twice its source positions), else (batch, frames, features)."""
    audio = audio_config(config)
    if not isinstance(getattr(audio, "num_mel_bins", None), int):
        return {1: "frames"}
    return {} if isinstance(getattr(audio, "max_source_positions", None), int) else {2: "frames"}


def dynamic_dims(
    model: torch.nn.Module, config: Any, recipe: tuple[str, ...], entry: dict[str, Any]
) -> tuple[dict[str, dict[str, str]], dict[str, int]]:
    """{input: {axis: dimension}} and the sizes the second shape gives them where the
    harness's default (batch 1, the others half) would not do: the candidate dimensions
    the head runs with in eager at the second shape, each alone and then all together (the
    last ones dropped until the whole second shape runs)."""
    torch.manual_seed(SEED)
    layout = {k: entry[k] for k in LAYOUT if k in entry}
    example = Inputs(generate(config, recipe, **layout), {}, (), recipe)
    wrapped = exportable(model, recipe)
    candidates = _absolute(candidate_dims(recipe, entry, config), example)
    sizes = _second_sizes(candidates, example, config)
    names = list(dict.fromkeys(d for axes in candidates.values() for d in axes.values()))
    groups = [{n, PATCHES} & set(names) if n == "batch" else {n} for n in names if n != PATCHES]

    def runs(kept: list[set[str]]) -> bool:
        other = second_shape(example, _only(candidates, set().union(*kept)), sizes)
        return _runs(wrapped, other, entry["outputs"])

    kept = [g for g in groups if runs([g])]
    while kept and not runs(kept):
        kept.pop()
    chosen = _only(candidates, set().union(*kept))
    dims = {
        n: {str(a): d for a, d in axes.items()}
        for n, axes in zip(recipe, chosen, strict=True)
        if axes
    }
    return dims, {d: v for d, v in sizes.items() if any(d in g for g in kept)}


def _second_sizes(dims: dict[str, dict[int, str]], example: Inputs, config: Any) -> dict[str, int]:
    """Where the second shape is not the harness's default (batch 1, the others half): an
    image is twice its size (the shrunk configs' images are small, 32 pixels a side for a
    ConvNet, and half of that leaves a deep ConvNet's last stage nothing to pool); a grid
    model's patch rows are one image's."""
    sizes = {}
    for name, tensor in zip(example.input_names, example.args, strict=True):
        for axis, dim in dims.get(name, {}).items():
            if dim in ("height", "width"):
                sizes[dim] = 2 * tensor.shape[axis]  # type: ignore[attr-defined]
            elif dim == PATCHES:
                sizes[dim] = grid_patches(config) ** 2
    return sizes


def _absolute(dims: dict[str, dict[int, str]], example: Inputs) -> dict[str, dict[int, str]]:
    """Negative axes (an image's last two) counted from the front of each input."""
    rank = {name: t.dim() for name, t in zip(example.input_names, example.args, strict=True)}
    return {n: {a % rank[n]: d for a, d in axes.items()} for n, axes in dims.items()}


def _only(dims: dict[str, dict[int, str]], keep: set[str]) -> tuple[dict[int, str], ...]:
    return tuple({a: d for a, d in axes.items() if d in keep} for axes in dims.values())


def _runs(model: torch.nn.Module, inputs: Inputs, outputs: int) -> bool:
    """Whether eager runs on `inputs` and gives `outputs` tensors."""
    try:
        with torch.no_grad():
            return len(inputs.call(model)) == outputs  # type: ignore[arg-type]
    except Exception:
        return False
