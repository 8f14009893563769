"""A zoo entry of a saved Hugging Face checkpoint (`--models hf:PATH_OR_REPO`, or one line
in a zoo file: `SPEC = checkpoint("./my-bert")`): the model built by `from_pretrained` with
its real weights, its class the one its config.json names (`architectures`), its inputs the
task heads' recipe for that class (the `transformers-tasks` inventory: the inputs it runs
with, their dynamic dimensions), or, for a class the inventory lacks, the recipe of its
head's kind. Reading the entry reads config.json only: neither torch nor transformers.

A location is a local `save_pretrained` directory, else a repo id in the Hugging Face cache,
else (where the network allows) the Hub; a location none of them has, a directory without
config.json, or a class the installed transformers lacks is `CheckpointError`: the command
that named it exits 2 with its message."""

from __future__ import annotations

import json
import os
import re
from functools import partial
from pathlib import Path
from typing import Any

from harness.zoo.spec import ModelSpec
from model_zoo.transformers._inventory import REQUIRES
from model_zoo.transformers._recipes import dynamic_shapes, modality
from model_zoo.transformers._tasks import TASKS_INVENTORY

FAMILY = "checkpoint"
PREFIX = "hf:"
WEIGHT_FILES = ("*.safetensors", "*.bin")
# A class the inventory lacks, by the end of its name: the inputs its kind of head takes.
RECIPES = {
    "ForConditionalGeneration": ("input_ids", "attention_mask", "decoder_input_ids"),
    "MTModel": ("input_ids", "attention_mask", "decoder_input_ids"),
    "ForImageClassification": ("pixel_values",),
    "ForSpeechSeq2Seq": ("input_features", "decoder_input_ids"),
    "ForCTC": ("input_values",),
}
TEXT = ("input_ids", "attention_mask")


class CheckpointError(ValueError):
    """A checkpoint that cannot be an entry: the message says which and why, in one line."""


def checkpoint(location: str | os.PathLike[str], *, name: str | None = None) -> ModelSpec:
    """The zoo entry of the checkpoint at `location` (see the module's docstring); its
    `source` says where a worker finds it again (`source_of`)."""
    where = resolve(str(location))
    config = _config(where, str(location))
    architecture = _architecture(config, str(location))
    recipe, layout = recipe_of(config.get("model_type", ""), architecture)
    weight_bytes = sum(p.stat().st_size for pattern in WEIGHT_FILES for p in where.glob(pattern))
    return ModelSpec(
        name=name or entry_name(str(location)),
        family=FAMILY,
        build=partial(_build, str(where), architecture, recipe),
        example_inputs=partial(_inputs, str(where), recipe, tuple(layout.items())),
        dynamic_shapes=dynamic_shapes(recipe),
        input_names=recipe,
        requires=REQUIRES,
        tags=(FAMILY, modality(recipe)),
        metadata={
            "checkpoint": str(location),
            "path": str(where),
            "model_type": config.get("model_type", ""),
            "class": architecture,
            "parameter_bytes": weight_bytes,
        },
        description=f"the checkpoint {location} ({architecture}), its own weights, inputs {', '.join(recipe)}",
        source=source_of(str(location)),
    )


SOURCE = "checkpoint:"


def source_of(location: str) -> str:
    """`checkpoint:<location>` (a local directory made absolute: a worker's folder may be
    another), as `harness.zoo.discovery.load_source` reads it back."""
    path = Path(location).expanduser()
    return SOURCE + (str(path.resolve()) if path.exists() else location)


def entry_name(location: str) -> str:
    """`hf.my-bert` for ./models/my-bert, `hf.org--name` for the repo org/name: a model
    name the run directory can use as a folder's."""
    path = Path(location)
    stem = path.name if path.exists() else location.replace("/", "--")
    return "hf." + re.sub(r"[^A-Za-z0-9_.-]", "_", stem)


def resolve(location: str) -> Path:
    """The checkpoint's directory: the local one, the cache's copy of a repo, or the Hub's."""
    path = Path(location).expanduser()
    if path.is_dir():
        return path.resolve()
    if path.exists():
        raise CheckpointError(f"{PREFIX}{location}: is a file, not a checkpoint's directory")
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise CheckpointError(f"{PREFIX}{location}: no such directory") from None
    for local_only in (True, False):  # the cache first; the Hub only where the network allows
        try:
            return Path(snapshot_download(location, local_files_only=local_only))
        except Exception as exc:
            problem = f"{type(exc).__name__}"
    raise CheckpointError(
        f"{PREFIX}{location}: no such directory, not in the Hugging Face cache, and the Hub"
        f" did not give it ({problem})"
    )


def _config(where: Path, location: str) -> dict[str, Any]:
    path = where / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{PREFIX}{location}: {where} has no config.json")
    try:
        config: dict[str, Any] = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{PREFIX}{location}: config.json is not JSON ({exc})") from None
    return config


def _architecture(config: dict[str, Any], location: str) -> str:
    names = config.get("architectures") or []
    if not names or not isinstance(names[0], str):
        raise CheckpointError(f"{PREFIX}{location}: config.json names no architecture")
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        raise CheckpointError(f"{PREFIX}{location}: needs transformers (pip install -e '.[hf]')")
    import transformers  # its lazy module lists its classes without importing them (or torch)

    if names[0] not in dir(transformers):
        version = transformers.__version__
        raise CheckpointError(
            f"{PREFIX}{location}: transformers {version} has no class {names[0]} (its config's"
            " architecture): upgrade transformers"
        )
    return names[0]


def recipe_of(model_type: str, architecture: str) -> tuple[tuple[str, ...], dict[str, int]]:
    """The inputs (and their layout) the task heads' inventory runs the class with; else
    the recipe of its kind of head; else text."""
    document = json.loads(TASKS_INVENTORY.read_text()) if TASKS_INVENTORY.is_file() else {}
    for entry in document.get("models", {}).values():
        if entry.get("class") == architecture and entry.get("inputs"):
            layout = {k: entry[k] for k in ("image_tokens", "choices", "eos") if entry.get(k)}
            return tuple(entry["inputs"]), layout
    kind = next((r for end, r in RECIPES.items() if architecture.endswith(end)), TEXT)
    return kind, {}


def _build(where: str, architecture: str, recipe: tuple[str, ...]) -> Any:
    import transformers

    from model_zoo.transformers._build import exportable, start_decoding_as_checkpoints_do

    transformers.logging.set_verbosity_error()
    model = getattr(transformers, architecture).from_pretrained(where).eval()
    start_decoding_as_checkpoints_do(model)
    return exportable(model, recipe)


def _inputs(where: str, recipe: tuple[str, ...], layout: tuple[tuple[str, int], ...]) -> Any:
    import transformers

    from model_zoo.transformers._inputs import generate

    config = transformers.AutoConfig.from_pretrained(where)
    return generate(config, recipe, **dict(layout))
