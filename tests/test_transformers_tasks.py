"""The task-heads zoo (model_zoo/transformers/tasks.py, the `transformers-tasks` suite): task
names and entry names (pure), the inventory and the entries made from it, the inputs each
task takes (multiple choice, layout boxes, grid images, an encoder-decoder classifier's
eos), the probe on heads it cannot feed, a sample of heads built and run as a cell does at
both shapes, the report by task and `harness compare` by task, and a handful of heads end
to end through the real CLI with a real local Ray. Every head is the sweep's
(benchmarks/test_transformers_tasks.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.cell.shapes import Inputs, second_shape
from harness.compare import compare_runs
from harness.compare.output.json_report import to_json
from harness.compare.output.markdown import to_markdown
from harness.compare.tasks import task_changes
from harness.report.tasks import tasks_section
from harness.store import rundir as store
from harness.store.environment import installed_version
from harness.store.runs import Run
from harness.store.status import Status
from harness.store.tasks import by_task, pass_rate, tasks_of
from harness.zoo import discovery
from model_zoo.transformers import _inputs, _tasks
from model_zoo.transformers._inventory import read_inventory
from tests.conftest import load_zoo_file_fresh, run_cli
from tests.fixtures_compare import record, typed_manifest

ZOO_FILE = discovery.BUILTIN_ZOO / "transformers" / "tasks.py"
INVENTORY = read_inventory(_tasks.TASKS_INVENTORY)
ENTRIES = INVENTORY["models"]
BUILT = sorted(n for n, e in ENTRIES.items() if "reason" not in e)
# One head per input layout: choices, layout boxes, an encoder-decoder classifier's eos, an
# image whose size moves, raw audio, a grid VLM, a Pixtral-style VLM with image sizes,
# speech features with decoder ids, a detector on transformers' own ResNet.
SAMPLE = [
    "hf.bert.multiple-choice",
    "hf.layoutlm.token-classification",
    "hf.bart.sequence-classification",
    "hf.convnext.image-classification",
    "hf.wav2vec2.ctc",
    "hf.qwen2_vl.image-text-to-text",
    "hf.mistral3.image-text-to-text",
    "hf.speech_to_text.speech-seq2seq",
    "hf.detr.object-detection",
    "hf.distilbert.question-answering",
]


# -- names (pure) ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mapping", "task"),
    [
        ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "sequence-classification"),
        ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "seq2seq-lm"),
        ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "speech-seq2seq"),
        ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "fill-mask"),
        ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "image-text-to-text"),
    ],
)
def test_a_mapping_names_its_task(mapping: str, task: str) -> None:
    assert _tasks.task_of(mapping) == task


def test_a_head_is_named_after_its_first_task_and_a_shared_one_after_its_class() -> None:
    tasks = ["pretraining", "multimodal-lm", "zero-shot-x", "causal-lm"]
    assert sorted(tasks, key=_tasks.task_order) == [
        "causal-lm", "zero-shot-x", "pretraining", "multimodal-lm",
    ]  # fmt: skip
    assert _tasks.class_task("DeiTForImageClassificationWithTeacher") == (
        "image-classification-with-teacher"
    )
    assert _tasks.class_task("PerceiverForImageClassificationConvProcessing") == (
        "image-classification-conv-processing"
    )
    assert _tasks.task_entry_name("wav2vec2-bert", "ctc") == "hf.wav2vec2-bert.ctc"


def test_the_registry_names_every_head_once() -> None:
    pytest.importorskip("transformers")
    from model_zoo.transformers._refresh import _tasks_named, task_heads

    heads = task_heads()
    named = _tasks_named({item: {} for item in heads})
    assert len(named) == len(heads)  # no two heads share a name
    deit = {n: e["class"] for n, e in named.items() if n.startswith("hf.deit.image-class")}
    assert deit == {
        "hf.deit.image-classification": "DeiTForImageClassification",
        "hf.deit.image-classification-with-teacher": "DeiTForImageClassificationWithTeacher",
    }
    gpt2 = named["hf.gpt2.causal-lm"]
    assert gpt2["class"] == "GPT2LMHeadModel" and "pretraining" in gpt2["tasks"]


# -- the inventory and the zoo entries -----------------------------------------------------------


def test_the_zoo_file_builds_nothing_and_imports_no_library() -> None:
    # (how long the load takes is a figure of benchmarks/, not a timed test here)
    count, _, transformers_loaded, torch_loaded = load_zoo_file_fresh(ZOO_FILE)
    assert count == len(ENTRIES) and not transformers_loaded and not torch_loaded


def test_every_head_is_an_entry_and_the_unbuildable_say_why() -> None:
    specs = {s.name: s for s in discovery.load_file(ZOO_FILE)}
    assert len(specs) == len(ENTRIES)
    assert len(BUILT) >= 900, f"only {len(BUILT)} heads build"
    registered = sum(len(e["tasks"]) for e in ENTRIES.values())
    assert registered >= 1300 and sum(len(ENTRIES[n]["tasks"]) for n in BUILT) >= 900
    for name, entry in ENTRIES.items():
        spec = specs[name]
        assert spec.family == "transformers-tasks" and spec.metadata["task"] == entry["tasks"][0]
        assert all(f"task:{t}" in spec.tags for t in entry["tasks"])
        if "reason" in entry:
            assert spec.skip_reason and entry["reason"] in spec.skip_reason
            continue
        assert spec.skip_reason is None and spec.input_names == tuple(entry["inputs"])
        assert spec.output_names == tuple(entry["output_names"])
        if entry["dims"]:
            assert len(spec.dynamic_shapes) == len(entry["inputs"])
        else:
            assert spec.dynamic_shapes is None  # no dynamic cell
        assert ("inputs-reduced" in spec.tags) == bool(entry.get("dropped"))


def test_a_head_needing_an_input_no_recipe_makes_is_skipped_naming_it() -> None:
    needs = {n: e["reason"] for n, e in ENTRIES.items() if "no recipe makes" in e.get("reason", "")}
    assert "hf.patchtst.time-series-classification" in needs
    assert "'past_values'" in needs["hf.patchtst.time-series-classification"]


@pytest.mark.skipif(
    installed_version("transformers") != INVENTORY["transformers"],
    reason=f"the tasks inventory is for transformers {INVENTORY['transformers']}; refresh it",
)
def test_the_inventory_covers_the_installed_heads() -> None:
    from model_zoo.transformers._refresh import _tasks_named, task_heads

    assert sorted(ENTRIES) == sorted(_tasks_named({item: {} for item in task_heads()}))


def test_task_selection_and_the_suite() -> None:
    zoo = discovery.discover()
    chosen = zoo.select(["task:multiple-choice"])
    assert chosen and all("multiple-choice" in s.metadata["tasks"] for s in chosen)
    assert {s.name for s in zoo.select(["tag:task:ctc"])} >= {"hf.wav2vec2.ctc"}


# -- inputs (generators, on configs) ------------------------------------------------------------------


def test_multiple_choice_boxes_and_eos_are_laid_out_as_processors_do() -> None:
    pytest.importorskip("transformers")
    from model_zoo.transformers._task_build import head_config

    torch.manual_seed(0)
    bert = head_config("layoutlm", "LayoutLMForTokenClassification")
    ids, _mask, boxes = _inputs.generate(bert, ("input_ids", "attention_mask", "bbox"))
    assert boxes.shape == (*ids.shape, 4) and (boxes >= 0).all() and (boxes <= 1000).all()
    assert (boxes[..., 2] >= boxes[..., 0]).all() and (boxes[..., 3] >= boxes[..., 1]).all()
    (choices,) = _inputs.generate(bert, ("input_ids",), choices=3)
    assert choices.shape == (_inputs.BATCH, 3, _inputs.SEQUENCE)
    bart = head_config("bart", "BartForSequenceClassification")
    (ids,) = _inputs.generate(bart, ("input_ids",), eos=5)
    assert (ids[:, 5] == bart.eos_token_id).all() and (ids[:, :5] != bart.eos_token_id).all()


def test_a_grid_model_gets_patch_rows_a_grid_and_its_image_tokens() -> None:
    pytest.importorskip("transformers")
    from model_zoo.transformers._task_build import head_config

    config = head_config("qwen2_vl", "Qwen2VLForConditionalGeneration")
    recipe = ("input_ids", "pixel_values", "image_grid_thw", "mm_token_type_ids")
    ids, pixels, grid, types = _inputs.generate(config, recipe, image_tokens=4)
    side = _inputs.grid_patches(config)
    vision = config.vision_config
    assert grid.tolist() == [[1, side, side]] * _inputs.BATCH
    assert pixels.shape == (
        _inputs.BATCH * side * side,
        vision.in_channels * vision.temporal_patch_size * vision.patch_size**2,
    )
    assert ((ids == config.image_token_id).sum(dim=1) == 4).all()
    assert torch.equal(types, (ids == config.image_token_id).long())
    rope = config.get_text_config().rope_parameters["mrope_section"]
    head_dim = config.get_text_config().hidden_size // config.get_text_config().num_attention_heads
    assert sum(rope) == head_dim // 2  # sized to the shrunk head


def test_missing_inputs_are_the_required_ones_no_generator_makes() -> None:
    from model_zoo.transformers._task_probe import missing_inputs

    class Forecaster(torch.nn.Module):
        def forward(self, past_values, input_ids, attention_mask=None, *, future=None):  # type: ignore[no-untyped-def]
            return past_values

    class Plain(torch.nn.Module):
        def forward(self, input_ids, pixel_values=None):  # type: ignore[no-untyped-def]
            return input_ids

    assert missing_inputs(Forecaster()) == ["past_values"]
    assert missing_inputs(Plain()) == []


def test_candidate_dims_follow_each_input() -> None:
    from model_zoo.transformers._task_probe import candidate_dims

    class Config:
        pass

    plain = candidate_dims(("input_ids", "bbox", "decoder_input_ids"), {}, Config())
    assert plain == {
        "input_ids": {0: "batch", 1: "sequence"},
        "bbox": {0: "batch", 1: "sequence"},
        "decoder_input_ids": {0: "batch", 1: "target"},
    }
    choices = candidate_dims(("input_ids",), {"choices": 3}, Config())
    assert choices == {"input_ids": {0: "batch", 1: "choices", 2: "sequence"}}
    vlm = candidate_dims(("input_ids", "pixel_values"), {"image_tokens": 4}, Config())
    assert vlm == {"input_ids": {0: "batch"}, "pixel_values": {0: "batch"}}
    grid = candidate_dims(
        ("input_ids", "pixel_values", "image_grid_thw"), {"image_tokens": 4}, Config()
    )
    assert grid["pixel_values"] == {0: "patches"} and grid["image_grid_thw"] == {0: "batch"}
    image = candidate_dims(("pixel_values",), {}, Config())
    assert image == {"pixel_values": {0: "batch", -2: "height", -1: "width"}}


# -- a sample, built and run as a cell does --------------------------------------------------------


def _spec(name: str):  # type: ignore[no-untyped-def]
    (spec,) = [s for s in discovery.load_file(ZOO_FILE) if s.name == name]
    return spec


def _forward(spec, inputs: tuple[object, ...]) -> list[torch.Tensor]:  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = spec.build().eval()
    with torch.no_grad():
        return list(model(*inputs))


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_runs_as_the_inventory_says_at_both_shapes(name: str) -> None:
    pytest.importorskip("transformers")
    entry = ENTRIES[name]
    assert "reason" not in entry, entry
    spec = _spec(name)
    torch.manual_seed(0)
    inputs = spec.example_inputs()
    outputs = _forward(spec, inputs)
    assert len(outputs) == len(entry["output_names"]) == len(spec.output_names)
    assert any(t.is_floating_point() for t in outputs)
    assert outputs[0].shape == _forward(spec, inputs)[0].shape
    if spec.dynamic_shapes is None:
        return
    other = second_shape(Inputs(tuple(inputs), {}), spec.dynamic_shapes, spec.dynamic_sizes)
    moved = [a.shape != b.shape for a, b in zip(inputs, other.args, strict=True)]
    assert any(moved)
    assert len(_forward(spec, other.args)) == len(outputs)


def test_the_sample_covers_what_it_claims() -> None:
    assert ENTRIES["hf.bert.multiple-choice"]["dims"]["input_ids"] == {
        "0": "batch", "1": "choices", "2": "sequence",
    }  # fmt: skip
    assert ENTRIES["hf.convnext.image-classification"]["sizes"] == {"height": 64, "width": 64}
    assert "image_grid_thw" in ENTRIES["hf.qwen2_vl.image-text-to-text"]["inputs"]
    assert "image_sizes" in ENTRIES["hf.mistral3.image-text-to-text"]["inputs"]
    assert ENTRIES["hf.bart.sequence-classification"]["eos"] > 0
    assert "bbox" in ENTRIES["hf.layoutlm.token-classification"]["inputs"]
    assert "ViT" in ENTRIES["hf.vit.image-classification"]["class"]
    assert "height" not in str(ENTRIES["hf.vit.image-classification"]["dims"])  # learned positions


# -- the report and compare, by task ----------------------------------------------------------------


def _tasked(
    model: str, tasks: str, exporter: str = "dynamo", status: str = "ok", run_id: str = "A"
):  # type: ignore[no-untyped-def]
    r = record(model, exporter, status=status, run_id=run_id,
               stage=None if status in ("ok", "skipped") else "translate",
               error=None if status in ("ok", "skipped") else RuntimeError(f"{model} broke"))  # fmt: skip
    return r.with_changes(metadata={"task": tasks.split(",")[0], "tasks": tasks})


def test_pass_rates_per_task_count_a_shared_head_in_each_task() -> None:
    records = [
        _tasked("a", "causal-lm,pretraining"),
        _tasked("b", "causal-lm", status="export_failed"),
        _tasked("c", "ctc"),
        _tasked("d", "ctc", status="skipped"),
        record("plain"),
    ]
    groups = by_task(records)
    assert list(groups) == ["causal-lm", "ctc", "pretraining"]
    assert pass_rate(groups["causal-lm"]).text() == "50%, 1/2"
    assert pass_rate(groups["ctc"]).text() == "100%, 1/1"  # the skipped cell does not count
    assert tasks_of(records[0]) == ("causal-lm", "pretraining") and tasks_of(records[-1]) == ()
    section = tasks_section(records)
    assert section is not None
    rates = section.blocks[1]
    rows = {row[0].text: [c.text for c in row[1:]] for row in rates.rows}  # type: ignore[union-attr]
    assert rows == {
        "causal-lm": ["50%, 1/2", "0"],
        "ctc": ["100%, 1/1", "1"],
        "pretraining": ["100%, 1/1", "0"],
    }
    clusters = section.blocks[-1]
    assert [row[0].text for row in clusters.rows] == ["causal-lm"]  # type: ignore[union-attr]
    assert tasks_section([record("plain")]) is None


def test_compare_says_which_tasks_regressed() -> None:
    base = [
        _tasked("a", "ctc"),
        _tasked("b", "ctc"),
        _tasked("c", "fill-mask", status="export_failed"),
        _tasked("d", "qa"),
    ]
    cand = [
        _tasked("a", "ctc", run_id="B"),
        _tasked("b", "ctc", status="export_failed", run_id="B"),
        _tasked("c", "fill-mask", run_id="B"),
        _tasked("d", "qa", run_id="B"),
    ]
    comparison = compare_runs(
        Run(typed_manifest("A"), tuple(base), "A"), Run(typed_manifest("B"), tuple(cand), "B")
    )
    changes = {t.task: t for t in task_changes(comparison)}
    assert set(changes) == {"ctc", "fill-mask"}  # qa did not move
    assert (changes["ctc"].regressed, changes["ctc"].before.text(), changes["ctc"].after.text()) == (
        1, "100%, 2/2", "50%, 1/2",
    )  # fmt: skip
    assert (changes["fill-mask"].fixed, changes["fill-mask"].after.text()) == (1, "100%, 1/1")
    assert task_changes(comparison)[0].task == "ctc"  # regressed tasks first
    assert "| ctc | 100%, 2/2 | 50%, 1/2 | 1 | 0 |" in to_markdown(comparison)
    assert to_json(comparison)["tasks"][0] == {
        "task": "ctc", "baseline": "100%, 2/2", "candidate": "50%, 1/2", "regressed": 1, "fixed": 0,
    }  # fmt: skip


# -- end to end: the real CLI, a real local Ray -------------------------------------------------------

E2E_HEADS = [
    "hf.bert.multiple-choice",
    "hf.layoutlm.token-classification",
    "hf.convnext.image-classification",
    "hf.wav2vec2.ctc",
]


@pytest.mark.e2e
def test_a_handful_of_heads_end_to_end(tmp_path: Path) -> None:
    """The dynamic cells of four heads (each verified at its second shape too: a static
    cell would add nothing), a head no recipe feeds and one that does not build: records by
    task, the second shape verified, the report's task table."""
    pytest.importorskip("transformers")
    unbuildable = next(n for n, e in ENTRIES.items() if e.get("stage") == "build")
    skipped = ["hf.patchtst.time-series-classification", unbuildable]
    out = tmp_path / "tasks"
    result = run_cli(
        "run", "--suite", "transformers-tasks", "--models", ",".join([*E2E_HEADS, *skipped]),
        "--dynamic-only", "--out", str(out), "--timeout", "300", "--repro-bound", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = store.read_records(out)
    by_cell = {(r.model, r.exporter, r.cell.dynamic): r for r in records}
    for name in E2E_HEADS:
        for exporter in ("dynamo", "torchscript"):
            r = by_cell[(name, exporter, True)]
            assert r.status is Status.OK, (r.cell.label(), r.error_signature, r.reason)
            assert tasks_of(r) == tuple(ENTRIES[name]["tasks"])
    dynamic = by_cell[("hf.bert.multiple-choice", "dynamo", True)]
    names = {c.name for c in dynamic.numerics.checks if c.ok}
    assert names == {"logits", "logits@second_shape"}  # the graph's output name, both shapes
    for name in skipped:
        r = by_cell[(name, "dynamo", True)]
        assert r.status is Status.SKIPPED and ENTRIES[name]["reason"][:40] in (r.reason or "")
    report = (out / "report.md").read_text()
    section = report.split("## Task heads", 1)[1].split("\n## ", 1)[0]
    for task, rs in by_task(records).items():
        rate = pass_rate(r for r in rs if r.exporter == "dynamo")
        if rate.total:
            assert f"| {task} | {rate.text()} |" in section


@pytest.mark.slow  # worker processes that build and run models: 4-10 s
def test_the_task_probe_is_served_by_the_refresh_driver(tmp_path: Path) -> None:
    """`harness zoo refresh transformers-tasks --types ...` probes in worker processes and
    writes an inventory the zoo file reads."""
    pytest.importorskip("transformers")
    out = tmp_path / "tasks.json"
    items = "bert:BertForMultipleChoice,patchtst:PatchTSTForClassification"
    result = run_cli(
        "zoo", "refresh", "transformers-tasks", "--types", items, "--jobs", "1", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "1 of 2 task heads build and run in eager" in result.stdout
    models = read_inventory(out)["models"]
    assert models["hf.bert.multiple-choice"]["choices"] == 3
    assert "past_values" in models["hf.patchtst.time-series-classification"]["reason"]


def test_an_encoders_causal_lm_head_attends_causally() -> None:
    """BERT's causal-LM head in its decoder mode, as a user sets it up: a later token does
    not change an earlier position's logits (in its encoder mode it would)."""
    pytest.importorskip("transformers")
    spec = _spec("hf.bert.causal-lm")
    torch.manual_seed(0)
    ids, mask = spec.example_inputs()
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 100
    first, second = _forward(spec, (ids, mask))[0], _forward(spec, (changed, mask))[0]
    assert torch.equal(first[:, :-1], second[:, :-1])
    assert not torch.equal(first[:, -1], second[:, -1])


def test_the_expected_failures_name_built_heads_and_judge_their_cells() -> None:
    from harness.zoo import expected_file

    rows = expected_file.read(_tasks.TASKS_EXPECTED).rows
    assert len(rows) > 100
    specs = {s.name: s for s in discovery.load_file(ZOO_FILE)}
    for row in rows:
        assert row.model in BUILT, f"{row.source}: {row.model} is not a built head"
        assert row.status is not None and row.stage is not None and row.reason, row.source
        assert row in specs[row.model].expect  # the entry judges its cells with it
