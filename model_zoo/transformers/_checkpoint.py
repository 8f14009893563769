"""A zoo entry of a saved Hugging Face checkpoint (`--models hf:PATH_OR_REPO`, or one line
in a zoo file: `SPEC = checkpoint("./my-bert")`): the model built by `from_pretrained` with
its real weights, its class the one its config.json names (`architectures`), its inputs the
task heads' recipe for that class (the `transformers-tasks` inventory: the inputs it runs
with, their dynamic dimensions), or, for a class the inventory lacks, the recipe of its
head's kind or of its model type. Reading the entry reads config.json, the weights' index
and their safetensors headers only: never torch, nor transformers' modules.

A location is a local `save_pretrained` directory, else a repo id in the Hugging Face cache,
else (where the network allows) the Hub; a location none of them has, a directory without
config.json or without weights, a shard its index names that is not there or is not a
safetensors file, or a class the installed transformers lacks (or that is no model) is
`CheckpointError`: the command that named it exits 2 with its message.

The entry is named `ckpt.<its folder>` (`ckpt.org--name` for a repo id): never a built-in
zoo's name (transformers' zoo has `hf.bert`). The model is built in float32 whatever dtype
it was saved in (the cell's dtype axis casts it, as every entry's)."""

from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from functools import cache, partial
from pathlib import Path
from typing import Any

from harness.zoo.spec import ModelSpec
from model_zoo.transformers._inventory import REQUIRES
from model_zoo.transformers._recipes import dynamic_shapes, modality
from model_zoo.transformers._tasks import TASKS_INVENTORY

FAMILY = "checkpoint"
PREFIX = "hf:"
NAME_PREFIX = "ckpt."
FLOAT32_BYTES = 4
HALF_DTYPES = ("float16", "bfloat16")
# A class the inventory lacks, by the end of its name: the inputs its kind of head takes.
RECIPES = {
    "VisionModel": ("pixel_values",),
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
    if not str(location).strip():
        raise CheckpointError(
            f"{PREFIX} names no checkpoint: give a save_pretrained directory or a repo id"
            f" ({PREFIX}./my-bert, {PREFIX}org/name)"
        )
    where = resolve(str(location))
    config = _config(where, str(location))
    architecture = _architecture(config, str(location))
    recipe, layout = recipe_of(config.get("model_type", ""), architecture)
    weight_bytes = float32_bytes(where, config, str(location))
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
            "saved_dtype": _saved_dtype(config),
            "parameter_bytes": weight_bytes,
        },
        description=f"the checkpoint {location} ({architecture}), its own weights, inputs {', '.join(recipe)}",
        source=source_of(str(location)),
    )


SOURCE = "checkpoint:"


def source_of(location: str) -> str:
    """`checkpoint:<location>` (a local directory made absolute: a worker's folder may be
    another), as `harness.zoo.discovery.load_source` reads it back."""
    return SOURCE + absolute(location)


def absolute(location: str) -> str:
    """A local directory's absolute path (`~` expanded); a repo id (or nothing) as it is."""
    path = _expanded(location)
    return str(path.resolve()) if location.strip() and path.exists() else location


def _expanded(location: str) -> Path:
    """`~` expanded where it names a user (`~nobody/x` as it is)."""
    try:
        return Path(location).expanduser()
    except RuntimeError:
        return Path(location)


def entry_name(location: str) -> str:
    """`ckpt.my-bert` for ./models/my-bert (and for `.` inside it), `ckpt.org--name` for
    the repo org/name: a model name the run directory can use as a folder's."""
    path = Path(absolute(location))
    stem = path.name if path.is_absolute() else location.replace("/", "--")
    return NAME_PREFIX + re.sub(r"[^A-Za-z0-9_.-]", "_", stem)


def resolve(location: str) -> Path:
    """The checkpoint's directory: the local one, the cache's copy of a repo, or the Hub's."""
    path = _expanded(location)
    if path.is_dir():
        return path.resolve()
    if path.exists():
        raise CheckpointError(f"{PREFIX}{location}: is a file, not a checkpoint's directory")
    if not REPO_ID.fullmatch(location):
        raise CheckpointError(f"{PREFIX}{location}: no such directory")
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


# What the Hub takes as a repo id (`name` or `org/name`); anything else is a path.
REPO_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)?")


def _config(where: Path, location: str) -> dict[str, Any]:
    path = where / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{PREFIX}{location}: {where} has no config.json")
    try:
        config: dict[str, Any] = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{PREFIX}{location}: config.json is not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{PREFIX}{location}: config.json is not a JSON object")
    return config


def _architecture(config: dict[str, Any], location: str) -> str:
    names = config.get("architectures") or []
    if isinstance(names, str):
        raise CheckpointError(
            f"{PREFIX}{location}: config.json's architectures is a string, not a list of"
            f' class names (["{names}"])'
        )
    if not isinstance(names, list) or not names or not isinstance(names[0], str):
        raise CheckpointError(f"{PREFIX}{location}: config.json names no architecture")
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        raise CheckpointError(f"{PREFIX}{location}: needs transformers (pip install -e '.[hf]')")
    import transformers

    if names[0] not in _public_names():
        version = transformers.__version__
        raise CheckpointError(
            f"{PREFIX}{location}: transformers {version} has no class {names[0]} (its config's"
            " architecture): upgrade transformers"
        )
    # the lazy module knows each class's module without importing it (private: else unchecked)
    module = getattr(transformers, "_class_to_module", {}).get(names[0], "modeling_")
    if "modeling_" not in module:
        raise CheckpointError(
            f"{PREFIX}{location}: config.json's architecture {names[0]} is not a model class"
            f" (transformers' {module})"
        )
    return names[0]


@cache
def _public_names() -> frozenset[str]:
    """What the installed transformers offers: its lazy module lists its classes without
    importing them (or torch); listing them takes 0.2 s, so once per process."""
    import transformers

    return frozenset(dir(transformers))


def float32_bytes(where: Path, config: dict[str, Any], location: str) -> int:
    """The weights' bytes once built in float32: the safetensors files' tensors (their
    headers: shapes only) or the .bin files' bytes at the dtype they were saved in. A
    checkpoint without weights, a shard its index names that is missing, or a file that is
    not safetensors' is `CheckpointError`."""
    weights = _weight_files(where, location)
    tensors = [p for p in weights if p.suffix == ".safetensors"]
    if tensors:
        return sum(_elements(p, location) for p in tensors) * FLOAT32_BYTES
    saved = sum(p.stat().st_size for p in weights)
    if not saved:
        raise CheckpointError(
            f"{PREFIX}{location}: {where} holds no weights (*.safetensors, *.bin)"
        )
    return saved * 2 if _saved_dtype(config) in HALF_DTYPES else saved


def _weight_files(where: Path, location: str) -> list[Path]:
    """The files `from_pretrained` loads: an index's shards, else the one weights file, else
    any (a folder may hold others: Mistral's consolidated.safetensors, an adapter's)."""
    for index in sorted(where.glob("*.index.json")):
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
            paths = [where / str(s) for s in shards]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise CheckpointError(
                f"{PREFIX}{location}: {index.name} is not a weights index"
            ) from None
        if missing := [p for p in paths if not p.is_file()]:
            raise CheckpointError(
                f"{PREFIX}{location}: {index.name} names {missing[0].name}, not in {where}"
            )
        return paths
    for single in ("model.safetensors", "pytorch_model.bin"):
        if (where / single).is_file():
            return [where / single]
    return sorted([*where.glob("*.safetensors"), *where.glob("*.bin")])


def _elements(path: Path, location: str) -> int:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            shapes = [f.get_slice(k).get_shape() for k in f.keys()]  # noqa: SIM118 (not a dict)
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(
            f"{PREFIX}{location}: {path.name} is not a safetensors file ({exc})"
        ) from None
    return sum(math.prod(shape) for shape in shapes)


def _saved_dtype(config: dict[str, Any]) -> str:
    return str(config.get("dtype") or config.get("torch_dtype") or "float32")


def recipe_of(model_type: str, architecture: str) -> tuple[tuple[str, ...], dict[str, int]]:
    """The inputs (and their layout) the task heads' inventory runs the class with; else
    the recipe of its kind of head; else text."""
    document = json.loads(TASKS_INVENTORY.read_text()) if TASKS_INVENTORY.is_file() else {}
    entries = [e for e in document.get("models", {}).values() if e.get("inputs")]
    for entry in entries:
        if entry.get("class") == architecture:
            return tuple(entry["inputs"]), _layout(entry)
    kind = next((r for end, r in RECIPES.items() if architecture.endswith(end)), None)
    if kind:
        return kind, {}
    entry = _entry_of_its_type(model_type, architecture, entries)
    if entry is None:
        return TEXT, {}
    return tuple(entry["inputs"]), _layout(entry)


def _layout(entry: dict[str, Any]) -> dict[str, int]:
    return {k: entry[k] for k in ("image_tokens", "choices", "eos") if entry.get(k)}


def _entry_of_its_type(
    model_type: str, architecture: str, entries: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The inventory's other class of the same model type whose inputs it takes: a base
    model's (`T5Model`, `WhisperModel`) its generating head's, else the commonest inputs'."""
    same = [e for e in entries if e.get("model_type") == model_type]
    heads = [e for e in same if e["class"].endswith("ForConditionalGeneration")]
    if architecture.endswith("Model") and heads:
        return heads[0]
    counts = Counter(tuple(e["inputs"]) for e in same)
    return max(same, key=lambda e: counts[tuple(e["inputs"])], default=None)


def _build(where: str, architecture: str, recipe: tuple[str, ...]) -> Any:
    import transformers

    from model_zoo.transformers._build import exportable, start_decoding_as_checkpoints_do

    transformers.logging.set_verbosity_error()
    # float32 whatever it was saved in, on every transformers the hf extra allows (`dtype=`
    # is 4.56's); a bfloat16 checkpoint's values are float32's exactly
    model = getattr(transformers, architecture).from_pretrained(where).float().eval()
    start_decoding_as_checkpoints_do(model)
    return exportable(model, recipe)


def _inputs(where: str, recipe: tuple[str, ...], layout: tuple[tuple[str, int], ...]) -> Any:
    import transformers

    from model_zoo.transformers._inputs import generate

    config = transformers.AutoConfig.from_pretrained(where)
    return generate(config, recipe, **dict(layout))
