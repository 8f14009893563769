"""The `transformers` suite's inventory: what the probe found for every model type of the
registry (the class, inputs and image token count it runs with, or the reason it does not
build or run), committed as `_inventory.json` so the zoo file reads it without building
anything; and the zoo entries made from it.

Imports neither torch nor transformers: the zoo file that uses it is imported for every cell
and by `harness list`.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from harness.store.environment import installed_version
from harness.zoo import ModelSpec
from harness.zoo.expect import Expect

# What building any transformers model imports (this suite's and the hf suite's, model_zoo/hf).
# Each cell runs in a child forked from its worker's zygote, which imports an entry's
# `requires` once (harness.runtime.zygote): with only "transformers" (a lazy package) every
# child imported ~1 000 modules itself (torch's distributed and dynamo packages, sympy,
# transformers' generation and integrations), about 1.3 s a cell.
REQUIRES = (
    "transformers",
    "transformers.modeling_utils",
    "transformers.generation.utils",
    "transformers.masking_utils",
    "transformers.modeling_layers",
    "transformers.processing_utils",
)

HERE = Path(__file__).resolve().parent
INVENTORY = HERE / "_inventory.json"
EXPECTED = HERE / "_expected.csv"
INVENTORY_SCHEMA = 1
FAMILY = "transformers"
PREFIX = "hf."
REFRESH_COMMAND = "harness zoo refresh transformers"
STAGE_WORDS = {
    "config": "its config does not shrink",
    "class": "no model class",
    "build": "does not build",
    "inputs": "no inputs generated",
    "eager": "does not run in eager",
}


def model_name(model_type: str) -> str:
    """The zoo name of a model type: `hf.` and the type, in the zoo's alphabet."""
    return PREFIX + re.sub(r"[^a-z0-9_.\-]", "-", model_type.lower())


# == the file ====================================================================================


def inventory_document(
    entries: dict[str, dict[str, Any]],
    *,
    registry_size: int,
    seconds: float,
    command: str = REFRESH_COMMAND,
) -> dict[str, Any]:
    return {
        "schema": INVENTORY_SCHEMA,
        "about": f"transformers model types probed from shrunk configs; regenerate with `{command}`",
        "transformers": installed_version("transformers"),
        "torch": installed_version("torch"),
        "generated": datetime.now(UTC).strftime("%Y-%m-%d"),
        "registry": registry_size,
        "probe_s": round(seconds, 1),
        "models": dict(sorted(entries.items())),
    }


def write_inventory(document: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")


def read_inventory(path: Path = INVENTORY) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    if document.get("schema") != INVENTORY_SCHEMA:
        raise ValueError(
            f"{path}: inventory schema {document.get('schema')!r}, this zoo reads "
            f"{INVENTORY_SCHEMA}; regenerate it with `{REFRESH_COMMAND}`"
        )
    return document


def skip_reason(entry: dict[str, Any]) -> str | None:
    """Why a model type's cells are skipped ('does not build: ValueError: ...'), or None."""
    if "reason" not in entry:
        return None
    return f"{STAGE_WORDS.get(entry.get('stage', ''), 'does not build')}: {entry['reason']}"


# == the zoo entries =============================================================================


def specs(document: dict[str, Any], expected: tuple[Expect, ...] = ()) -> list[ModelSpec]:
    """One ModelSpec per model type of the inventory; the ones that do not build or run in
    eager carry their reason (`skip_reason`), so their cells are skipped with it."""
    return [
        _spec(model_type, entry, expected)
        for model_type, entry in sorted(document["models"].items())
    ]


def _spec(model_type: str, entry: dict[str, Any], expected: tuple[Expect, ...]) -> ModelSpec:
    name = model_name(model_type)
    class_name = entry.get("class") or "?"
    recipe = tuple(entry.get("inputs") or ())
    reason = skip_reason(entry)
    if reason is not None:
        return ModelSpec(
            name=name,
            family=FAMILY,
            build=partial(unbuildable, reason),
            example_inputs=partial(unbuildable, reason),
            tags=(FAMILY, "does-not-build", entry.get("stage", "build")),
            requires=REQUIRES,
            skip_reason=reason,
            description=f"transformers model type {model_type!r}: {reason[:120]}",
        )
    from model_zoo.transformers._recipes import dynamic_shapes, modality

    return ModelSpec(
        name=name,
        family=FAMILY,
        build=partial(_build, model_type, class_name, recipe),
        example_inputs=partial(_example_inputs, model_type, recipe, entry.get("image_tokens", 0)),
        dynamic_shapes=dynamic_shapes(recipe),
        input_names=recipe,  # the graph's inputs carry the model's input names
        tags=(FAMILY, modality(recipe), "base" if class_name.endswith("Model") else "task-head"),
        expect=expected_for(expected, name),
        requires=REQUIRES,
        description=f"transformers {class_name} ({model_type}), shrunk config, inputs {', '.join(recipe)}",
    )


def expected_for(expected: tuple[Expect, ...], name: str) -> tuple[Expect, ...]:
    """The rows of a generated zoo's expected failures that name this entry (by glob)."""
    import fnmatch

    return tuple(e for e in expected if fnmatch.fnmatchcase(name, e.model))


def unbuildable(reason: str) -> Any:
    """The build and inputs of an entry that does not build: its skip reason, raised."""
    raise RuntimeError(reason)


def _build(model_type: str, class_name: str, recipe: tuple[str, ...]) -> Any:
    from model_zoo.transformers._build import build_model, exportable

    return exportable(build_model(model_type, class_name), recipe)


def _example_inputs(model_type: str, recipe: tuple[str, ...], image_tokens: int) -> tuple[Any, ...]:
    from model_zoo.transformers._build import offline
    from model_zoo.transformers._inputs import generate
    from model_zoo.transformers._shrink import shrunk_config

    offline()
    return generate(shrunk_config(model_type), recipe, image_tokens=image_tokens)
