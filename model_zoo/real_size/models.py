"""The models people ship, at the size they ship them (the `real-size` family and suite):
heavily used Hugging Face architectures at their published configs, the values of each
checkpoint's `config.json` written down in `_configs.json`, with random weights under the
harness's seed; nothing is downloaded. Each entry is the head its checkpoint is deployed
with (a masked-LM, a sentence embedder's bare encoder, an image classifier, a detector, a
speech recogniser, a translator, a causal LM) fed inputs of a deployment size (128 tokens,
224x224 images, 30 s of audio features), behind the keyword wrapper of the transformers
zoos (a flat tuple of output tensors).

Importing this file reads the JSON only: neither torch nor transformers. The metadata says
each model's parameters and their float32 bytes (what a cell's memory need is sized from)
and the checkpoint it mirrors."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from harness.zoo import ModelSpec

FAMILY = "real-size"
XL = "real-size-xl"  # the larger ones (over 1.5 B or 3 GB), not in the suite: by name or family
CONFIGS = Path(__file__).resolve().parent / "_configs.json"
TWO_GIB = 2**31
# The dimensions each kind of input may change along (torch.export's names).
DIMENSIONS: dict[str, dict[int, str]] = {
    "input_ids": {0: "batch", 1: "sequence"},
    "attention_mask": {0: "batch", 1: "sequence"},
    "token_type_ids": {0: "batch", 1: "sequence"},
    "decoder_input_ids": {0: "batch", 1: "target"},
    "input_values": {0: "batch", 1: "samples"},
}
MODALITY = {"pixel_values": "vision", "input_features": "audio", "input_values": "audio"}
# Over this many float32 weight bytes (half harness.cell.reference's FLOAT64_MAX_PARAM_BYTES)
# no float64 reference is made, so the float32 gate alone judges, while ORT and torch sum
# long dot products in different orders: Llama-3.2-1B's logits differ by up to 1.7e-5 (46 of
# 16.4 M values past the default atol 1e-5), as model_zoo/large/linear_stack_2gb.py's do;
# such entries get its atol of 1e-4.
WITHOUT_FLOAT64_REFERENCE = 256 * 2**20
NO_FLOAT64_TOLERANCE = (1e-4, 1e-4)


def _spec(name: str, entry: dict[str, Any]) -> ModelSpec:
    inputs: dict[str, list[int]] = entry["inputs"]
    names = tuple(inputs)
    weight_bytes = int(entry["fp32_bytes"])
    big = ("external-data",) if weight_bytes > TWO_GIB else ()
    modality = next((MODALITY[n] for n in names if n in MODALITY), "text")
    return ModelSpec(
        name=f"real.{name}",
        family=FAMILY if entry["suite"] else XL,
        build=partial(_build, name),
        example_inputs=partial(_inputs, name),
        dynamic_shapes=tuple(DIMENSIONS.get(n, {0: "batch"}) for n in names),
        input_names=names,
        tolerance=NO_FLOAT64_TOLERANCE if weight_bytes > WITHOUT_FLOAT64_REFERENCE else None,
        requires=("transformers",),
        tags=(
            FAMILY if entry["suite"] else XL,
            f"task:{entry['task']}",
            modality,
            *big,
            *(("generates",) if entry["generates"] else ()),
        ),
        metadata={
            "checkpoint": entry["checkpoint"],
            "model_type": entry["model_type"],
            "class": entry["head_class"],
            "task": entry["task"],
            "parameters": int(entry["params_counted"]),
            "parameter_bytes": weight_bytes,
        },
        description=(
            f"{entry['checkpoint']} at its published config ({entry['params_counted'] / 1e6:.0f}M"
            f" parameters, {weight_bytes / 1e9:.2f} GB in float32), {entry['head_class']},"
            f" task {entry['task']}, inputs {', '.join(f'{n} {s}' for n, s in inputs.items())}"
        ),
    )


def entry(name: str) -> dict[str, Any]:
    entry: dict[str, Any] = _document()["models"][name]
    return entry


def _document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(CONFIGS.read_text())
    return document


def _build(name: str) -> Any:
    from model_zoo.real_size._build import build

    return build(entry(name))


def _inputs(name: str) -> tuple[Any, ...]:
    from model_zoo.real_size._build import example_inputs

    return example_inputs(entry(name))


SPECS = [_spec(name, entry) for name, entry in _document()["models"].items()]
