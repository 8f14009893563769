"""The real-size zoo (model_zoo/real_size/): the architectures people ship at their
published configs. Every entry builds from its config (on the meta device: no memory, no
time) with the parameters its metadata says, and takes its example inputs; the suite has
what issue 47 asks of it; the smallest entries build and run for real."""

from __future__ import annotations

import json

import pytest
import torch

from harness.plan.suites import load_suite
from harness.zoo import discovery
from model_zoo.real_size import models
from model_zoo.real_size._build import build, config_of, example_inputs

ZOO = discovery.discover(entry_points=False)
ENTRIES = json.loads(models.CONFIGS.read_text())["models"]
SUITE = ZOO.select(load_suite("real-size").models)
MASKS = ("attention_mask", "pixel_mask")
# transformers' forward calls `.item()` on these models' own masks: no forward on meta
NO_META_FORWARD = {"detr_r50", "bart_base", "marian_en_de", "deberta_v3_base"}
# What issue 47 names, by architecture: encoders, vision, audio, seq2seq, decoders.
NAMED = {
    "bert_base", "distilbert_base", "roberta_base", "xlm_roberta_base", "minilm_l6",
    "modernbert_base", "deberta_v3_base", "vit_base", "resnet50", "convnext_tiny",
    "dinov2_small", "dinov2_base", "clip_b32_text", "clip_b32_vision", "swin_tiny", "detr_r50",
    "whisper_base", "whisper_small", "wav2vec2_base", "t5_small", "bart_base", "marian_en_de",
    "smollm2_360m", "qwen3_0_6b", "llama3_2_1b", "gemma3_1b",
}  # fmt: skip


def test_the_suite_holds_the_named_architectures_and_two_past_2_gb() -> None:
    names = {s.name.removeprefix("real.") for s in SUITE}
    assert names >= NAMED and len(names) >= 30
    large = [s for s in SUITE if "external-data" in s.tags]
    assert len(large) >= 2
    assert all(s.metadata["parameter_bytes"] > 2**31 for s in large)
    assert all(s.family == "real-size" and "real-size" in s.tags for s in SUITE)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_each_entry_builds_at_its_published_size_and_takes_its_inputs(name: str) -> None:
    entry = ENTRIES[name]
    spec = ZOO.get(f"real.{name}")
    with torch.device("meta"):
        model = build(entry)
    counted = sum(p.numel() for p in model.parameters())
    assert counted == spec.metadata["parameters"] == entry["params_counted"]
    assert abs(counted / entry["published_params"] - 1) < 0.03  # the checkpoint's size
    assert spec.metadata["parameter_bytes"] == 4 * counted
    torch.manual_seed(0)
    inputs = example_inputs(entry)
    assert [list(t.shape) for t in inputs] == list(entry["inputs"].values())
    assert spec.input_names == tuple(entry["inputs"])
    if name not in NO_META_FORWARD:  # masks left out: transformers checks them with `.item()`
        meta = [
            None if n in MASKS else t.to("meta")
            for n, t in zip(entry["inputs"], inputs, strict=True)
        ]
        with torch.no_grad():
            outputs = model(*meta)
        assert outputs and all(o.shape[0] == inputs[0].shape[0] for o in outputs)


def test_the_config_is_the_checkpoints_as_transformers_reads_it() -> None:
    """Values transformers converts on reading (Llama-3.2's rope scaling, Gemma-3's layer
    types) come out as a `from_pretrained` of the checkpoint gives them."""
    llama = config_of(ENTRIES["llama3_2_1b"])
    assert llama.rope_parameters["rope_type"] == "llama3" and llama.tie_word_embeddings
    gemma = config_of(ENTRIES["gemma3_1b"])
    full = [i for i, kind in enumerate(gemma.layer_types) if kind == "full_attention"]
    assert full == [5, 11, 17, 23]


@pytest.mark.slow  # real weights: 23 M parameters
def test_the_smallest_entry_builds_and_runs_for_real() -> None:
    spec = ZOO.get("real.minilm_l6")
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    inputs = spec.example_inputs()
    with torch.no_grad():
        (hidden, pooled) = model(*inputs)
    assert tuple(hidden.shape) == (1, 128, 384) and tuple(pooled.shape) == (1, 384)
    assert torch.isfinite(hidden).all()


def test_a_real_size_decoder_is_the_decode_entry_of_its_type_at_its_published_layers() -> None:
    """`real.<name>.decode`: the probed shrunk entry of its model type, its cache inputs and
    outputs one per published layer, named and dimensioned as the shrunk entry's."""
    from model_zoo.real_size.decoders import DECODERS
    from model_zoo.real_size.models import entry
    from model_zoo.transformers._decode_inventory import with_layers

    specs = {
        s.name: s for s in discovery.discover().models.values() if s.family == "real-size-decode"
    }
    assert sorted(specs) == sorted(f"real.{n}.decode" for n in DECODERS)
    qwen = specs["real.qwen3_0_6b.decode"]
    layers = entry("qwen3_0_6b")["config"]["num_hidden_layers"]
    assert layers == 28
    assert qwen.input_names[:3] == ("input_ids", "attention_mask", "position_ids")
    assert qwen.input_names[3:] == tuple(
        f"past_key_values.{i}.{k}" for i in range(layers) for k in ("key", "value")
    )
    assert qwen.output_names == (
        "logits",
        *(f"present.{i}.{k}" for i in range(layers) for k in ("key", "value")),
    )
    assert qwen.metadata["parameter_bytes"] == entry("qwen3_0_6b")["fp32_bytes"]
    assert qwen.metadata["generation"] == {"mask_past": True}
    # every cache tensor is dynamic in batch and past, as the shrunk entry's
    cache_dims = qwen.dynamic_shapes[-1]
    assert len(cache_dims) == 2 * layers and all(d == {0: "batch", 2: "past"} for d in cache_dims)

    shrunk = {"inputs": ["input_ids", "past_key_values.0.key", "past_key_values.0.value"],
              "outputs": ["logits", "present.0.key", "present.0.value"],
              "dims": {"input_ids": {"0": "batch"}, "past_key_values.0.key": {"0": "batch"}}}  # fmt: skip
    grown = with_layers(shrunk, 3)
    assert grown["inputs"][1:] == [
        f"past_key_values.{i}.{k}" for i in range(3) for k in ("key", "value")
    ]
    assert grown["dims"]["past_key_values.2.value"] == {"0": "batch"}


def test_entries_without_a_float64_reference_are_judged_by_the_large_models_tolerance() -> None:
    """Where a float64 copy is not made (harness.cell.reference), the float32 gate alone
    judges: such entries, and only they, get atol 1e-4."""
    from harness.cell.reference import FLOAT64_MAX_PARAM_BYTES

    assert models.WITHOUT_FLOAT64_REFERENCE * 2 == FLOAT64_MAX_PARAM_BYTES
    specs = {
        s.name: s for s in discovery.load_file(discovery.BUILTIN_ZOO / "real_size" / "models.py")
    }
    looser = {n for n, s in specs.items() if s.tolerance == models.NO_FLOAT64_TOLERANCE}
    heavy = {
        n
        for n, s in specs.items()
        if s.metadata["parameter_bytes"] > models.WITHOUT_FLOAT64_REFERENCE
    }
    assert looser == heavy and "real.llama3_2_1b" in looser and "real.minilm_l6" not in looser
    assert all(specs[n].tolerance is None for n in set(specs) - heavy)
