"""The `transformers-tasks` suite's inventory: every task head of the installed registry (one
entry per model type and head class of transformers' `MODEL_FOR_<TASK>_MAPPING_NAMES`),
what the task probe found for it (the inputs it runs with in eager, their dynamic
dimensions, or the reason it does not build or run), committed as `_tasks_inventory.json`;
and the zoo entries made from it, named `hf.<model_type>.<task>`.

Imports neither torch nor transformers: the zoo file that uses it is imported for every cell
and by `harness list`.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from harness.zoo import ModelSpec
from harness.zoo.expect import Expect
from model_zoo.transformers._inventory import (
    HERE,
    REQUIRES,
    expected_for,
    model_name,
    skip_reason,
    unbuildable,
)
from model_zoo.transformers._recipes import LAYOUT, modality

TASKS_INVENTORY = HERE / "_tasks_inventory.json"
TASKS_EXPECTED = HERE / "_tasks_expected.csv"
TASKS_FAMILY = "transformers-tasks"
TASKS_REFRESH = "harness zoo refresh transformers-tasks"

# Task names a user knows (pipeline names where transformers has one) for the mappings
# whose generic name (`MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM` -> `seq-to-seq-causal-lm`) reads badly.
RENAMED = {
    "SEQ_TO_SEQ_CAUSAL_LM": "seq2seq-lm",
    "SPEECH_SEQ_2_SEQ": "speech-seq2seq",
    "MASKED_LM": "fill-mask",
    "IMAGE": "image-features",
}
# Where one head class serves several tasks (GPT-2's LM head is its causal-LM and its
# pretraining head), the entry is named after the first of them in this order; the
# others are in its tags. Tasks not listed follow in alphabetical order.
PREFERRED = (
    "causal-lm",
    "fill-mask",
    "seq2seq-lm",
    "image-text-to-text",
    "speech-seq2seq",
    "sequence-classification",
    "token-classification",
    "question-answering",
    "image-classification",
    "object-detection",
    "ctc",
)
LAST = ("pretraining", "multimodal-lm")


def task_of(mapping: str) -> str:
    """`MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES` -> `sequence-classification`."""
    stem = mapping.removeprefix("MODEL_FOR_").removesuffix("_MAPPING_NAMES")
    return RENAMED.get(stem, stem.lower().replace("_", "-"))


def task_order(task: str) -> tuple[int, str]:
    if task in PREFERRED:
        return (0, f"{PREFERRED.index(task):03d}")
    return (2, f"{LAST.index(task):03d}") if task in LAST else (1, task)


def class_task(class_name: str) -> str:
    """A head's own task name, for a mapping that lists several classes for one type:
    `DeiTForImageClassificationWithTeacher` -> `image-classification-with-teacher`."""
    stem = class_name.rpartition(".")[2]
    stem = stem.split("For", 1)[1] if "For" in stem else stem
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", stem).lower()


def task_entry_name(model_type: str, task: str) -> str:
    """`hf.bert.sequence-classification`: the zoo name of a type's head."""
    return f"{model_name(model_type)}.{task}"


# == the zoo entries =============================================================================


def task_specs(document: dict[str, Any], expected: tuple[Expect, ...] = ()) -> list[ModelSpec]:
    """One entry per head of the inventory; the ones that do not build or run in eager
    carry their reason, so their cells are skipped with it."""
    return [_spec(name, entry, expected) for name, entry in sorted(document["models"].items())]


def _spec(name: str, entry: dict[str, Any], expected: tuple[Expect, ...]) -> ModelSpec:
    model_type, class_name, tasks = entry["model_type"], entry["class"], entry["tasks"]
    common: dict[str, Any] = {
        "name": name,
        "family": TASKS_FAMILY,
        "requires": REQUIRES,
        "metadata": {
            "model_type": model_type,
            "task": entry["task"],
            "tasks": ",".join(tasks),
            "class": class_name,
        },
    }
    task_tags = tuple(f"task:{t}" for t in tasks)
    reason = skip_reason(entry)
    if reason is not None:
        return ModelSpec(
            **common,
            build=partial(unbuildable, reason),
            example_inputs=partial(unbuildable, reason),
            dynamic_shapes=({0: "batch"},),  # so that a dynamic-only matrix records the skip
            tags=(TASKS_FAMILY, *task_tags, "does-not-build", entry.get("stage", "build")),
            skip_reason=reason,
            description=f"transformers {class_name} ({model_type}): {reason[:120]}",
        )
    recipe = tuple(entry["inputs"])
    layout = _layout(entry)
    dropped = entry.get("dropped")
    reduced: tuple[str, ...] = ()
    if dropped:  # said in the records and the report: a VLM head fed text alone
        common["metadata"] |= {"dropped": ",".join(dropped)}
        reduced = ("inputs-reduced",)
    return ModelSpec(
        **common,
        build=partial(_build, model_type, class_name, tuple(tasks), recipe),
        example_inputs=partial(
            _example_inputs, model_type, class_name, tuple(tasks), recipe, layout
        ),
        dynamic_shapes=dynamic_shapes(entry),
        dynamic_sizes=entry.get("sizes"),
        input_names=recipe,
        output_names=tuple(entry["output_names"]),
        tags=(TASKS_FAMILY, *task_tags, modality(recipe), *reduced),
        expect=expected_for(expected, name),
        description=(
            f"transformers {class_name} ({model_type}), task {entry['task']}, shrunk config,"
            f" inputs {', '.join(recipe)}"
            + (f"; without {', '.join(dropped)} ({entry['dropped_because']})" if dropped else "")
        ),
    )


def dynamic_shapes(entry: dict[str, Any]) -> tuple[dict[int, str], ...] | None:
    """One {axis: dimension} per input, as the probe found them (every dimension it names
    ran in eager at the second verification shape); None for a head with none (it gets no
    dynamic cell)."""
    dims: dict[str, dict[str, str]] = entry.get("dims", {})
    if not dims:
        return None
    return tuple({int(a): d for a, d in dims.get(n, {}).items()} for n in entry["inputs"])


def _layout(entry: dict[str, Any]) -> dict[str, int]:
    """How the inputs are laid out beyond their names (`_inputs.Layout`: image tokens per
    image, choices, the eos position)."""
    return {k: entry[k] for k in LAYOUT if entry.get(k)}


def _build(
    model_type: str, class_name: str, tasks: tuple[str, ...], recipe: tuple[str, ...]
) -> Any:
    from model_zoo.transformers._build import exportable
    from model_zoo.transformers._task_build import build_head

    return exportable(build_head(model_type, class_name, tasks), recipe)


def _example_inputs(
    model_type: str,
    class_name: str,
    tasks: tuple[str, ...],
    recipe: tuple[str, ...],
    layout: dict[str, int],
) -> tuple[Any, ...]:
    from model_zoo.transformers._inputs import generate
    from model_zoo.transformers._task_build import head_config

    return generate(head_config(model_type, class_name, tasks), recipe, **layout)
