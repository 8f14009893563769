"""Does a model type build from its shrunk config and run in eager? The probe answers for one
model type with the facts the inventory keeps: the class, the inputs (recipe) and the image
token count it runs with, or the reason it does not (the first failure of its first class,
with the stage: config, class, build, inputs or eager).

It builds exactly as a cell does (seed 0 before the model, seed 0 before the inputs, eval
mode, the same wrapper), so what the inventory says builds, builds in the worker.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from harness.store.error_text import error_signature
from model_zoo.transformers._build import (
    build_model,
    candidate_classes,
    named_outputs,
    offline,
)
from model_zoo.transformers._inputs import (
    candidate_recipes,
    generate,
    image_feature_count,
    image_token,
)
from model_zoo.transformers._shrink import shrunk_config

SEED = 0
MAX_CLASSES = 4  # a type whose first few classes all fail is not worth more builds


def probe(model_type: str) -> dict[str, Any]:
    """The inventory entry of one model type: {"class", "inputs", ...} or {"reason", ...}."""
    offline()
    try:
        shrunk_config(model_type)
    except Exception as exc:
        return failure_entry("config", exc)
    classes = candidate_classes(model_type)
    if not classes:
        return {"stage": "class", "reason": "no model class is registered for this config"}
    first_failure: dict[str, Any] | None = None
    for class_name in classes[:MAX_CLASSES]:
        entry = _probe_class(model_type, class_name)
        if "reason" not in entry:
            return entry
        first_failure = first_failure or entry
    assert first_failure is not None
    return first_failure


def _probe_class(model_type: str, class_name: str) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        torch.manual_seed(SEED)
        model = build_model(model_type, class_name)
    except Exception as exc:
        return failure_entry("build", exc, class_name)
    build_s = time.perf_counter() - start
    failure: dict[str, Any] | None = None
    for recipe in candidate_recipes(model):
        entry = try_recipe(model, recipe)
        if "reason" not in entry:
            parameters = sum(p.numel() for p in model.parameters())
            return {
                "class": class_name,
                **entry,
                "parameters": parameters,
                "build_s": round(build_s, 3),
            }
        failure = failure or {"class": class_name, **entry}
    return failure or {
        "class": class_name,
        "stage": "inputs",
        "reason": "no input this suite generates",
    }


def try_recipe(
    model: torch.nn.Module, recipe: tuple[str, ...], *, choices: int = 0, eos: int = 0
) -> dict[str, Any]:
    """The inventory's facts of `model` run in eager on `recipe` (inputs, outputs, image
    tokens, choices, eos position), or the stage and reason it failed at."""
    image_tokens = 0
    try:
        if "pixel_values" in recipe and image_token(model.config) is not None:
            image_tokens = image_feature_count(model, recipe)
        torch.manual_seed(SEED)
        inputs = generate(model.config, recipe, image_tokens=image_tokens, choices=choices, eos=eos)
    except Exception as exc:
        return failure_entry("inputs", exc)
    start = time.perf_counter()
    try:
        with torch.no_grad():
            outputs = named_outputs(model(**dict(zip(recipe, inputs, strict=True))))
    except Exception as exc:
        return failure_entry("eager", exc)
    if not any(t.is_floating_point() for _, t in outputs):
        return {"stage": "eager", "reason": "the model returns no float tensor"}
    entry: dict[str, Any] = {
        "inputs": list(recipe),
        "outputs": len(outputs),
        "output_names": [name for name, _ in outputs],
    }
    if image_tokens:
        entry["image_tokens"] = image_tokens
    entry.update({k: v for k, v in (("choices", choices), ("eos", eos)) if v})
    entry["forward_s"] = round(time.perf_counter() - start, 3)
    return entry


def failure_entry(stage: str, exc: BaseException, class_name: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"class": class_name} if class_name else {}
    message = _message(exc)
    entry.update(
        stage=stage,
        reason=error_signature(type(exc).__name__, message),
        error=f"{type(exc).__name__}: {message.splitlines()[0][:300] if message else ''}",
    )
    return entry


def _message(exc: BaseException) -> str:
    """The message, with a headline that only announces the next line ('Class validation
    error for validator ...:') joined to that line, so the reason says what is wrong."""
    lines = [ln.strip() for ln in (str(exc).strip() or repr(exc)).splitlines() if ln.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        lines = [f"{lines[0]} {lines[1]}", *lines[2:]]
    return "\n".join(lines)
