"""Does a model type's causal-LM (or seq2seq-LM) head build from its shrunk config with a KV
cache and run one generation step in eager? The probe answers for one (type, head) with the
facts the decode inventory keeps, or the reason it does not (stage: config, class, build,
cache, eager):

- the class, the cache class and its layers' classes;
- the graph's input names (`input_ids`, `attention_mask`, `position_ids` where the model
  takes them, `past_key_values.0.key`, ...) and output names (`logits`, `present.0.key`, ...);
- the dynamic dimensions of every input, found by building the inputs at two shapes and
  naming each axis that moved with the batch, the past length or the encoder length;
- whether a cache of no tokens can be made (the prefill shape, past 0).

It builds as a cell does (seed 0 before the model and before the inputs, eval mode, the
same wrapper), so what the inventory says builds, builds in the worker.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.utils._pytree as pytree

from model_zoo.transformers._build import offline
from model_zoo.transformers._decode import (
    EXAMPLE,
    SEQ2SEQ,
    Seq2SeqDecodeStep,
    build_lm,
    decode_step,
    head_class,
    inputs_at,
    leaf_names,
)
from model_zoo.transformers._probe import failure_entry
from model_zoo.transformers._shrink import shrunk_config

SEED = 0
# A second shape whose every dimension differs from the example's and from every other
# size in the cache, so that an axis that moved says which dimension it is.
OTHER = {"batch": 3, "sequence": 4, "past": 7, "encoder": 12}


def probe(model_type: str, head: str) -> dict[str, Any]:
    """The decode inventory entry of one (type, head): facts, or {"stage", "reason"}."""
    offline()
    try:
        shrunk_config(model_type)
        class_name = head_class(model_type, head)
    except Exception as exc:
        return failure_entry("config", exc)
    first: dict[str, Any] = {}
    for mask_past in (True, False) if head != SEQ2SEQ else (True,):
        entry = _probe_step(model_type, head, mask_past=mask_past)
        if "reason" not in entry:
            return {"class": class_name, **entry, **({} if mask_past else {"mask": "sequence"})}
        first = first or {"class": class_name, **entry}
    return first


def _probe_step(model_type: str, head: str, *, mask_past: bool) -> dict[str, Any]:
    """Build the step and run it, with the attention mask over the past and new tokens or
    (a recurrent model's) over the new ones only."""
    start = time.perf_counter()
    try:
        torch.manual_seed(SEED)
        step = decode_step(build_lm(model_type, head), head, mask_past=mask_past)
    except Exception as exc:
        return failure_entry("build", exc)
    build_s = time.perf_counter() - start
    try:
        torch.manual_seed(SEED)
        example = inputs_at(step, EXAMPLE)
        torch.manual_seed(SEED)
        other = inputs_at(step, OTHER)
    except Exception as exc:
        return failure_entry("cache", exc)
    return {**_facts(step, example, other), "build_s": round(build_s, 3)}


def _facts(step: Any, example: tuple[Any, ...], other: tuple[Any, ...]) -> dict[str, Any]:
    cache = example[-1]
    names = [*_plain_names(step, example), *leaf_names(cache, "past_key_values")]
    try:
        dims = input_dims(names, example, other)
    except ValueError as exc:
        return failure_entry("cache", exc)
    layers = getattr(getattr(cache, "self_attention_cache", cache), "layers", [])
    start = time.perf_counter()
    try:
        with torch.no_grad():
            outputs = step(*example)
    except Exception as exc:
        return failure_entry("eager", exc)
    # The step updated the cache it was given in place: it is now the present cache.
    output_names = ["logits", *leaf_names(cache, "present")]
    if len(output_names) != len(outputs):
        return {"stage": "cache", "reason": f"{len(outputs)} outputs, {len(output_names)} named"}
    return {
        "step": "encoder-decoder" if isinstance(step, Seq2SeqDecodeStep) else "decoder",
        "cache": type(cache).__name__,
        "layers": sorted({type(layer).__name__ for layer in layers}),
        "inputs": names,
        "dims": dims,
        "outputs": output_names,
        "empty_cache": _empty_cache_reason(step),
        "parameters": sum(p.numel() for p in step.parameters()),
        "step_s": round(time.perf_counter() - start, 3),
    }


def _plain_names(step: Any, example: tuple[Any, ...]) -> list[str]:
    if isinstance(step, Seq2SeqDecodeStep):
        return ["input_ids", "encoder_attention_mask", "encoder_hidden_states"]
    return ["input_ids", "attention_mask", *(["position_ids"] if example[2] is not None else [])]


def input_dims(
    names: list[str], example: tuple[Any, ...], other: tuple[Any, ...]
) -> dict[str, dict[str, str]]:
    """{input name: {axis: dimension}} for every input with a dynamic axis: the axes whose
    size moved between the two shapes, named by how it moved (2 -> 3 is the batch, ...)."""
    moved_by = {(EXAMPLE[k], OTHER[k]): k for k in EXAMPLE}
    moved_by[(EXAMPLE["past"] + EXAMPLE["sequence"], OTHER["past"] + OTHER["sequence"])] = "total"
    a, b = tensors(example), tensors(other)
    if len(a) != len(b):
        raise ValueError(f"the inputs hold {len(a)} tensors at one shape, {len(b)} at another")
    if len(a) != len(names):
        raise ValueError(f"the inputs hold {len(a)} tensors, {len(names)} are named")
    dims: dict[str, dict[str, str]] = {}
    for name, x, y in zip(names, a, b, strict=True):
        if x.dim() != y.dim():
            raise ValueError(f"{name} has rank {x.dim()} at one shape and {y.dim()} at another")
        moved = {
            str(i): (m, n) for i, (m, n) in enumerate(zip(x.shape, y.shape, strict=True)) if m != n
        }
        unknown = [f"axis {i}: {m} -> {n}" for i, (m, n) in moved.items() if (m, n) not in moved_by]
        if unknown:
            raise ValueError(f"{name} changes size in a way no dimension explains ({unknown[0]})")
        if moved:
            dims[name] = {i: moved_by[size] for i, size in moved.items()}
    return dims


def tensors(inputs: Any) -> list[torch.Tensor]:
    """The tensors of nested inputs in flattening order (a None input is no tensor)."""
    return [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]


def _empty_cache_reason(step: Any) -> str | None:
    """Why no cache of 0 tokens can be made (a cache of recurrent states cannot be cut), or
    None where the prefill shape (past 0) can be run."""
    try:
        torch.manual_seed(SEED)
        inputs_at(step, {**EXAMPLE, "past": 0})
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None
