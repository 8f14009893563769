"""The `transformers-decode` suite's inventory: what the decode probe found for every causal-LM
and seq2seq-LM head of the registry (the class, its cache, the graph's input and output
names and dynamic dimensions, or the reason it does not build or run a step with a cache),
committed as `_decode_inventory.json`; and the zoo entries made from it.

Imports neither torch nor transformers: the zoo file is imported for every cell and by
`harness list`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from harness.store.environment import installed_version
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

DECODE_INVENTORY = HERE / "_decode_inventory.json"
DECODE_EXPECTED = HERE / "_decode_expected.csv"
DECODE_FAMILY = "transformers-decode"
CAUSAL, SEQ2SEQ = "causal-lm", "seq2seq-lm"
SUFFIX = {CAUSAL: ".decode", SEQ2SEQ: ".decode-seq2seq"}
DECODE_REFRESH = "harness zoo refresh transformers-decode"

# Where a dynamic cell is verified again: a prefill (another batch, no past, a prompt) and
# a decode step (another batch, another past, one new token). Sizes stay inside the
# shrunk configs' 128 positions.
PREFILL_CHECK = {"batch": 1, "sequence": 4, "past": 0, "encoder": 6}
DECODE_CHECK = {"batch": 3, "sequence": 1, "past": 9, "encoder": 6}
# What deployments time: one new token after a past of 32, and a prompt of 32 tokens.
LATENCY = {
    "decode_step": {"batch": 1, "sequence": 1, "past": 32, "encoder": 16},
    "prefill": {"batch": 1, "sequence": 32, "past": 0, "encoder": 16},
}


def decode_name(model_type: str, head: str) -> str:
    """`hf.llama.decode`, `hf.t5.decode-seq2seq`: the zoo name of a type's decode entry."""
    return model_name(model_type) + SUFFIX[head]


def decode_specs(document: dict[str, Any], expected: tuple[Expect, ...] = ()) -> list[ModelSpec]:
    """One entry per (type, head) of the inventory; the ones that do not build or run a step
    with a cache carry their reason, so their (dynamic) cells are skipped with it."""
    return [_spec(name, entry, expected) for name, entry in probed_entries(document).items()]


def probed_entries(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The inventory's entries, each with the transformers it was probed with."""
    version = document.get("transformers")
    return {name: {**e, "probed_with": version} for name, e in sorted(document["models"].items())}


def _spec(name: str, entry: dict[str, Any], expected: tuple[Expect, ...]) -> ModelSpec:
    model_type, head = entry["model_type"], entry["head"]
    common: dict[str, Any] = {
        "name": name,
        "family": DECODE_FAMILY,
        "requires": REQUIRES,
        "metadata": {
            "model_type": model_type,
            "head": head,
            "cache": entry.get("cache"),
            "cache_layers": entry.get("layers"),
        },
    }
    reason = skip_reason(entry)
    if reason is not None:
        return ModelSpec(
            **common,
            build=partial(unbuildable, reason),
            example_inputs=partial(unbuildable, reason),
            # a dynamic spec, so that the suite's dynamic-only matrix records the skip
            dynamic_shapes=({0: "batch"},),
            tags=(DECODE_FAMILY, head, "does-not-build", entry.get("stage", "build")),
            skip_reason=reason,
            description=f"transformers {head} {model_type!r} with a KV cache: {reason[:120]}",
        )
    mask_past = entry.get("mask") != "sequence"
    # A cache of recurrent states cannot be emptied: its prefill starts from one token.
    prefill_past = 0 if entry.get("empty_cache") is None else 1
    if entry["step"] == "decoder" and prefill_past == 0:
        # Generation token by token from an empty cache (harness.cell.generation).
        common["metadata"] = {**common["metadata"], "generation": {"mask_past": mask_past}}
    elif entry["step"] == "encoder-decoder":
        # The source text through the encoder (exported too), then the decoder steps from
        # an empty self-attention cache and the encoder's cross-attention cache
        # (harness.cell.encdec).
        common["metadata"] = {**common["metadata"], "generation": {"encoder_decoder": True}}

    def sizes(named: dict[str, int], **changes: int) -> dict[str, int]:
        # The encoder's length is a dimension of encoder-decoder steps only.
        kept = {k: v for k, v in named.items() if k != "encoder" or entry["step"] != "decoder"}
        return {**kept, **changes}

    return ModelSpec(
        **common,
        build=partial(_build, model_type, head, mask_past),
        example_inputs=partial(_example_inputs, model_type, head, mask_past, entry),
        inputs_at=_inputs_at,
        dynamic_shapes=dynamic_shapes(entry),
        dynamic_sizes=(sizes(PREFILL_CHECK, past=prefill_past), sizes(DECODE_CHECK)),
        latency_shapes={k: sizes(v, past=max(v["past"], prefill_past)) for k, v in LATENCY.items()},
        input_names=tuple(entry["inputs"]),
        output_names=tuple(entry["outputs"]),
        tags=(DECODE_FAMILY, head, entry.get("cache") or "cache"),
        expect=expected_for(expected, name),
        description=(
            f"transformers {entry['class']} ({model_type}), one generation step with a"
            f" {entry.get('cache')} of the past, shrunk config"
        ),
    )


def dynamic_shapes(entry: dict[str, Any]) -> tuple[Any, ...]:
    """The torch.export-style spec of the step's positional inputs: the token inputs' axes,
    then one entry per cache tensor (a list, as torch.export takes it for a cache that
    flattens into its tensors)."""
    dims = {name: {int(a): d for a, d in axes.items()} for name, axes in entry["dims"].items()}
    names = entry["inputs"]
    cache = [n for n in names if n.startswith("past_key_values.")]
    plain = [dims.get(n) or None for n in names if n not in cache]
    if entry.get("step") == "decoder" and "position_ids" not in names:
        plain.append(None)  # the position_ids argument the model does not take
    return (*plain, [dims.get(n) or None for n in cache])


def _build(model_type: str, head: str, mask_past: bool, published: str | None = None) -> Any:
    from model_zoo.transformers._decode import build_lm, decode_step

    return decode_step(build_lm(model_type, head, published), head, mask_past=mask_past)


def _example_inputs(
    model_type: str, head: str, mask_past: bool, entry: dict[str, Any], published: str | None = None
) -> tuple[Any, ...]:
    """The inputs at the example shape (the prefill that makes their cache needs the model:
    it is built again, under the same seed). Where the installed transformers flattens the
    cache into other tensors than the one the entry was probed with, says so."""
    from harness.cell.shapes import Inputs
    from model_zoo.transformers._decode import EXAMPLE, inputs_at

    inputs = inputs_at(_build(model_type, head, mask_past, published), EXAMPLE)
    count = len(Inputs(inputs, {}).leaves())  # the graph inputs, as the cell counts them
    if count != len(entry["inputs"]):
        raise ValueError(
            f"transformers {installed_version('transformers')} gives this step {count} input tensors"
            f" where the inventory, probed with transformers {entry.get('probed_with')},"
            f" names {len(entry['inputs'])}: `{DECODE_REFRESH}` probes it again"
        )
    return inputs


def with_layers(entry: dict[str, Any], layers: int) -> dict[str, Any]:
    """A probed entry of a shrunk config as the same class has it with `layers` layers:
    its cache inputs and outputs (`past_key_values.N.*`, `present.N.*`) one per layer."""

    def per_layer(names: list[str], prefix: str) -> list[str]:
        kinds = list(dict.fromkeys(n.split(".")[-1] for n in names if n.startswith(prefix)))
        return [f"{prefix}{i}.{k}" for i in range(layers) for k in kinds]

    past, present = "past_key_values.", "present."
    inputs = [n for n in entry["inputs"] if not n.startswith(past)] + per_layer(
        entry["inputs"], past
    )
    outputs = [n for n in entry["outputs"] if not n.startswith(present)]
    outputs += per_layer(entry["outputs"], present)
    cache_dims = next(d for n, d in entry["dims"].items() if n.startswith(past))
    dims = {n: entry["dims"].get(n, cache_dims) for n in inputs}
    return {**entry, "inputs": inputs, "outputs": outputs, "dims": dims}


def published_decode_spec(
    name: str, entry: dict[str, Any], published: str, family: str, metadata: dict[str, Any]
) -> ModelSpec:
    """The decode entry of a real-size entry's published config (`published`): the probed
    entry of its model type (`with_layers` its layer count), built from the published
    config; its name, family and metadata (the weights' bytes) the real-size entry's."""
    spec = _spec(name, entry, ())
    model_type, head = entry["model_type"], entry["head"]
    mask_past = entry.get("mask") != "sequence"
    return replace(
        spec,
        family=family,
        build=partial(_build, model_type, head, mask_past, published),
        example_inputs=partial(_example_inputs, model_type, head, mask_past, entry, published),
        tags=(family, *spec.tags[1:]),
        metadata={**spec.metadata, **metadata},
        description=f"{entry['class']} ({model_type}) at {metadata.get('checkpoint')}'s"
        " published config, one generation step with a cache of the past",
    )


def _inputs_at(model: Any, sizes: dict[str, int]) -> tuple[Any, ...]:
    from model_zoo.transformers._decode import inputs_at

    return inputs_at(model, sizes)
