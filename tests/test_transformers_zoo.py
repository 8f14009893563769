"""The generated transformers zoo (model_zoo/transformers/, the `transformers` suite): the
shrink and the input recipes (pure, fast), the inventory and the entries made from it, a
sample of model types built and run exactly as a cell does, and a handful of architectures
end to end through the real CLI with a real local Ray. The whole registry is swept by
benchmarks/test_transformers_sweep.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.cell.shapes import Inputs, second_shape
from harness.cli import main
from harness.store import rundir as store
from harness.store.environment import installed_version
from harness.store.status import Status
from harness.zoo import discovery, expected_file
from model_zoo.transformers import _inventory, _recipes, _shrink
from tests.conftest import REPO, load_zoo_file_fresh, run_cli

ZOO_FILE = discovery.BUILTIN_ZOO / "transformers" / "architectures.py"
INVENTORY = _inventory.read_inventory()
MODELS = INVENTORY["models"]
BUILT = sorted(t for t, e in MODELS.items() if "reason" not in e)
# Text, GQA + RoPE, encoder-decoder audio, raw audio, vision, hierarchical vision, a
# vision-language model with image tokens, multi-head latent attention with experts, a
# hybrid Mamba model, per-layer attention kinds.
SAMPLE = [
    "bert",
    "llama",
    "whisper",
    "wav2vec2",
    "vit",
    "swin",
    "llava",
    "deepseek_v3",
    "bamba",
    "gemma3",
]


def _llama_like(**changes: object) -> dict[str, object]:
    values: dict[str, object] = {
        "model_type": "llama", "vocab_size": 128256, "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
        "bos_token_id": 128000, "eos_token_id": [128001, 128009], "pad_token_id": 0,
        "use_cache": True, "rope_parameters": {"rope_type": "default", "rope_theta": 5e5},
    }  # fmt: skip
    values.update(changes)
    return values


# -- the shrink (pure: dicts in, dicts out) ---------------------------------------------------


def test_every_size_becomes_small_and_structure_stays() -> None:
    out = _shrink.shrink(_llama_like(), tokens={})
    assert out["num_hidden_layers"] == _shrink.LAYERS == 2
    assert (out["hidden_size"], out["num_attention_heads"], out["head_dim"]) == (64, 4, 16)
    assert out["intermediate_size"] == 128 and out["vocab_size"] == 512
    assert out["max_position_embeddings"] == 128
    assert out["use_cache"] is False
    assert out["rope_parameters"] == {"rope_type": "default", "rope_theta": 5e5}


@pytest.mark.parametrize(
    ("heads", "kv", "expected"), [(32, 32, 4), (32, 8, 2), (32, 1, 1), (2, 2, 2)]
)
def test_grouped_query_attention_stays_grouped(heads: int, kv: int, expected: int) -> None:
    out = _shrink.shrink(_llama_like(num_attention_heads=heads, num_key_value_heads=kv), tokens={})
    assert out["num_key_value_heads"] == expected
    assert out["num_attention_heads"] % out["num_key_value_heads"] == 0


def test_special_token_ids_move_below_the_shrunk_vocabulary_consistently() -> None:
    composite = {
        "model_type": "llava", "image_token_id": 128256,
        "text_config": _llama_like(),
        "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024,
                          "num_attention_heads": 16, "image_size": 336, "patch_size": 14},
    }  # fmt: skip
    out = _shrink.shrink(composite, tokens={})
    text = out["text_config"]
    ids = [out["image_token_id"], text["bos_token_id"], *text["eos_token_id"]]
    assert len(set(ids)) == 4, "distinct ids stay distinct"
    assert all(512 - _shrink.SPECIAL_IDS <= i < 512 for i in ids)
    assert text["pad_token_id"] == 0, "ids already inside the vocabulary stay"
    vision = out["vision_config"]
    assert (vision["hidden_size"], vision["num_attention_heads"]) == (64, 4)
    assert vision["image_size"] == 14 * _shrink.PATCHES_PER_SIDE


def test_per_layer_lists_keep_every_kind_of_layer() -> None:
    kinds = ["sliding_attention"] * 5 + ["full_attention"]
    values = _llama_like(
        num_hidden_layers=30,
        layer_types=kinds * 5,
        per_layer_config={f"{i:02d}": {"head_dim": 512} for i in range(5, 30, 6)},
        mlp_only_layers=[0, 7, 29],
    )
    out = _shrink.shrink(values, tokens={})
    assert out["layer_types"] == ["sliding_attention", "full_attention"]
    assert out["per_layer_config"] == {"01": {"head_dim": 16}}
    assert out["mlp_only_layers"] == [0]


def test_hierarchical_vision_keeps_its_proportions_and_image_size() -> None:
    swin = {
        "model_type": "swin", "image_size": 224, "patch_size": 4, "embed_dim": 96,
        "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24], "window_size": 7, "hidden_size": 768,
    }  # fmt: skip
    out = _shrink.shrink(swin, tokens={})
    assert out["depths"] == [2, 2, 2, 2] and out["num_heads"] == [1, 2, 4, 8]
    assert out["embed_dim"] == 32 and out["hidden_size"] == 32 * 8
    assert (out["image_size"], out["window_size"]) == (224, 7)


def test_latent_attention_and_experts_stay_consistent() -> None:
    deepseek = _llama_like(
        head_dim=64, qk_rope_head_dim=64, qk_nope_head_dim=128, qk_head_dim=192, v_head_dim=128,
        kv_lora_rank=512, q_lora_rank=1536, n_routed_experts=256, num_experts_per_tok=8,
        n_group=8, topk_group=4, first_k_dense_replace=3,
    )  # fmt: skip
    out = _shrink.shrink(deepseek, tokens={})
    assert out["head_dim"] == out["qk_rope_head_dim"] == 8
    assert out["qk_head_dim"] == out["qk_nope_head_dim"] + out["qk_rope_head_dim"]
    assert (out["n_routed_experts"], out["num_experts_per_tok"]) == (4, 2)
    assert (out["n_group"], out["topk_group"], out["first_k_dense_replace"]) == (1, 1, 1)


def test_a_backbone_outputs_its_last_layers() -> None:
    dinov2 = {
        "model_type": "dinov2", "hidden_size": 768, "num_hidden_layers": 12,
        "num_attention_heads": 12, "stage_names": ["stem", *(f"stage{i}" for i in range(1, 13))],
        "out_indices": [3, 6, 9, 12], "out_features": ["stage3", "stage6", "stage9", "stage12"],
    }  # fmt: skip
    out = _shrink.shrink(dinov2, tokens={})
    assert out["num_hidden_layers"] == 4 and out["out_indices"] == [1, 2, 3, 4]
    assert out["out_features"] == ["stage1", "stage2", "stage3", "stage4"]
    assert out["stage_names"][-1] == "stage4"


# -- recipes (pure) --------------------------------------------------------------------------------


def test_dynamic_dimensions_follow_the_recipe() -> None:
    assert _recipes.dynamic_shapes(("input_ids", "attention_mask", "decoder_input_ids")) == (
        {0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"}, {0: "batch", 1: "target"},
    )  # fmt: skip
    # Image tokens fix the text's length: only the batch is dynamic.
    assert _recipes.dynamic_shapes(("input_ids", "attention_mask", "pixel_values")) == (
        {0: "batch"}, {0: "batch"}, {0: "batch"},
    )  # fmt: skip
    assert _recipes.dynamic_shapes(("input_values",)) == ({0: "batch", 1: "samples"},)
    assert _recipes.modality(("input_ids", "pixel_values")) == "multimodal"
    assert _recipes.modality(("input_features", "decoder_input_ids")) == "multimodal"
    assert _recipes.modality(("pixel_values",)) == "vision"


# -- the inventory and the zoo entries -----------------------------------------------------------


def test_the_zoo_file_builds_nothing_and_imports_no_library() -> None:
    """Workers import the zoo file for every cell: it reads the inventory, nothing more."""
    # (how long the load takes is a figure of benchmarks/, not a timed test here)
    count, _, transformers_loaded, torch_loaded = load_zoo_file_fresh(ZOO_FILE)
    assert count == len(MODELS) and not transformers_loaded and not torch_loaded


def test_every_model_type_is_an_entry_and_the_unbuildable_say_why() -> None:
    specs = {s.name: s for s in discovery.load_file(ZOO_FILE)}
    assert len(specs) == len(MODELS) == INVENTORY["registry"]
    assert len(BUILT) >= 400, f"only {len(BUILT)} model types build"
    # What the zygote imports for every cell (harness.runtime.zygote) imports here: a
    # module misnamed in `requires` would skip every cell of the suite.
    built = specs[_inventory.model_name(next(iter(BUILT)))]
    assert len(built.requires) > 1 and built.missing_requirement() is None
    for model_type, entry in MODELS.items():
        spec = specs[_inventory.model_name(model_type)]
        assert spec.family == "transformers" and spec.requires[0] == "transformers"
        if "reason" in entry:
            assert spec.skip_reason and entry["reason"] in spec.skip_reason
            assert "does-not-build" in spec.tags
        else:
            assert spec.skip_reason is None
            assert len(spec.dynamic_shapes) == len(entry["inputs"])
            assert spec.input_names == tuple(entry["inputs"])  # the graph's input names
            assert all(e.model == spec.name for e in spec.expect)


def test_the_test_install_pins_the_transformers_every_inventory_was_probed_with() -> None:
    """The README's test command installs `-c .ci/constraints.txt`: with the transformers
    pinned there, the registry-coverage tests below run rather than skip (a new release
    changed the caches' tensors under a stale inventory and turned CI red)."""
    pins = dict(
        line.split("==", 1)
        for line in (REPO / ".ci" / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    probed = {
        path.name: _inventory.read_inventory(path)["transformers"]
        for path in sorted(_inventory.HERE.glob("_*inventory.json"))
    }
    assert len(probed) == 3
    assert set(probed.values()) == {pins["transformers"]}, probed


@pytest.mark.skipif(
    installed_version("transformers") != INVENTORY["transformers"],
    reason=f"the inventory is for transformers {INVENTORY['transformers']}; refresh it for this one",
)
def test_the_inventory_covers_the_installed_registry() -> None:
    from model_zoo.transformers._refresh import registry

    assert sorted(MODELS) == registry()


def test_the_expected_failures_are_in_the_expected_status_grammar() -> None:
    rows = expected_file.read(_inventory.EXPECTED).rows
    names = {_inventory.model_name(t) for t in BUILT}
    for row in rows:
        assert row.model in names, f"{row.source}: {row.model} is not a built model type"
        assert row.status is not None and row.stage is not None and row.reason, row.source


# -- a sample, built and run as a cell does ---------------------------------------------------------


def _spec(model_type: str):  # type: ignore[no-untyped-def]
    (spec,) = [
        s for s in discovery.load_file(ZOO_FILE) if s.name == _inventory.model_name(model_type)
    ]
    return spec


def _forward(spec, inputs: tuple[torch.Tensor, ...]) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = spec.build().eval()
    with torch.no_grad():
        return list(model(*inputs))


@pytest.mark.parametrize("model_type", SAMPLE)
def test_a_sample_builds_runs_and_is_deterministic(model_type: str) -> None:
    pytest.importorskip("transformers")
    if model_type not in BUILT:
        pytest.fail(f"{model_type} no longer builds: {MODELS[model_type]}")
    spec = _spec(model_type)
    torch.manual_seed(0)
    inputs = spec.example_inputs()
    first, second = _forward(spec, inputs), _forward(spec, inputs)
    assert any(t.is_floating_point() for t in first)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
        if a.is_floating_point():
            assert torch.isfinite(a).all()
    # The dynamic cell's second shape (batch 1, half the sequence) runs too.
    other = second_shape(Inputs(tuple(inputs), {}), spec.dynamic_shapes, spec.dynamic_sizes)
    assert _forward(spec, other.args)


def test_list_counts_what_builds_and_groups_the_reasons(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    assert main(["list", "--suite", "transformers"]) == 0
    out = capsys.readouterr().out
    skipped = len(MODELS) - len(BUILT)
    assert f"{len(BUILT)} of {len(MODELS)} models run here; {skipped} are skipped" in out
    assert "does not build" in out


# -- end to end: the real CLI, a real local Ray -------------------------------------------------------

# A text encoder and a speech model through the real CLI; every architecture (VLMs, speech
# seq2seq, ...) is the sweep's (benchmarks/test_transformers_sweep.py).
E2E_TYPES = ["bert", "wav2vec2"]


@pytest.mark.e2e
def test_a_handful_of_architectures_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    unbuildable = next(t for t, e in MODELS.items() if e.get("stage") == "build")
    models = [_inventory.model_name(t) for t in [*E2E_TYPES, unbuildable]]
    out = tmp_path / "tf"
    result = run_cli(
        "run", "--suite", "transformers", "--models", ",".join(models), "--opsets", "18",
        "--out", str(out), "--timeout", "300",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = store.read_records(out)
    assert sorted(r.cell.key for r in records) == sorted({r.cell.key for r in records})
    assert len(records) == len(models) * 2  # both exporters, opset 18, static: one record each
    by_cell = {(r.model, r.exporter): r for r in records}
    for exporter in ("dynamo", "torchscript"):
        skipped = by_cell[(_inventory.model_name(unbuildable), exporter)]
        assert skipped.status is Status.SKIPPED and "does not build" in (skipped.reason or "")
        bert = by_cell[("hf.bert", exporter)]
        assert bert.status is Status.OK, (bert.error_message, bert.reason)
        assert bert.numerics.checks and all(c.ok for c in bert.numerics.checks)
    for r in records:
        assert r.status.passing, (r.cell.label(), r.status, r.error_signature, r.reason)
    assert (out / "report.md").is_file()


def test_building_sets_the_hub_offline() -> None:
    pytest.importorskip("transformers")
    from huggingface_hub import constants

    from model_zoo.transformers._build import build_model

    build_model("bert", "BertModel")
    assert constants.HF_HUB_OFFLINE is True


def test_expected_rows_name_the_deterministic_failures_of_a_run() -> None:
    """`harness zoo expected RUN` writes one row per failing cell of a transformers run
    (timeouts and crashes are the machine's, not the exporter's), pinning the error type;
    the rows then judge the same records as expected (xfail)."""
    from datetime import date

    from harness.store.records import Cell, Measurements, Record
    from harness.zoo.expect import judge
    from harness.zoo.expected import updated_rows
    from harness.zoo.generated.transformers import expected_files

    def cell(model: str, exporter: str = "dynamo") -> Cell:
        return Cell(model, exporter, 18, family="transformers")

    cause = KeyError("no lowering")
    error = RuntimeError("export failed")
    error.__cause__ = cause
    records = [
        Record.finished(cell("hf.a"), "r", Measurements(), status=Status.EXPORT_FAILED, stage="translate", error=error),
        Record.finished(cell("hf.b"), "r", Measurements(), status=Status.OK),
        Record.without_run(cell("hf.c"), "r", status=Status.TIMEOUT, reason="cell exceeded 300 s"),
        Record.without_run(cell("hf.d"), "r", status=Status.SKIPPED, reason="does not build: x"),
    ]  # fmt: skip
    (row,) = updated_rows((), records, expected_files()[0])
    assert (row.model, row.exporter, row.opset, row.shape) == ("hf.a", "dynamo", "18", "static")
    assert (row.status, str(row.stage)) == (Status.EXPORT_FAILED, "translate")
    assert row.match == f"^{records[0].error_signature.split(':')[0]}:"  # type: ignore[union-attr]
    judged = judge(records[0], (row,), date.today())
    assert judged.status is Status.XFAIL and judged.reason == row.reason
