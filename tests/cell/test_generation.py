"""Generation token by token (issue 40; harness.cell.generation): the harness's greedy loop
is what eager `generate` picks, a decode-suite graph and transformers' own components
generate in ORT the tokens eager does, and a graph that picks others fails the cell at
numerics. Real transformers models from shrunk configs, real exports, real ORT."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import onnx
import pytest
import torch
from onnx import helper

from harness.cell import generation
from harness.cell.ort import OrtRunner
from harness.cell.stages import StageFailure
from harness.runtime import components
from harness.runtime.worker import find_spec, run_cell
from harness.store.measures import ComponentCheck, OutputCheck
from harness.store.records import Cell, CellTask, Measurements, OrtOpt, Record
from harness.store.status import Stage, Status
from model_zoo.transformers._decode import build_lm

REPO = Path(__file__).resolve().parents[2]
DECODERS = REPO / "model_zoo" / "transformers" / "decoders.py"
BROKEN = REPO / "tests" / "zoo_fixtures" / "generation" / "models.py"
PLAIN = REPO / "benchmarks" / "plain_generate.py"
TOLERANCE = (1e-4, 1e-5)  # rtol, atol: the default


def _logits(*values: float) -> torch.Tensor:
    return torch.tensor(values)


def test_the_first_different_token_is_found_with_the_logits_error_up_to_it() -> None:
    eager = ([1, 0, 2], [_logits(0, 5, 1), _logits(5, 1, 0), _logits(0, 0, 3)])
    ort = ([1, 2, 2], [_logits(0, 5, 1), _logits(1, 1, 4), _logits(0, 0, 3)])
    found = generation.compare(eager, ort, TOLERANCE)
    assert (found.agree, found.first_difference, found.tie_gap) == (1, 1, None)
    assert found.max_logits_abs == [0.0, 4.0]
    assert not found.ok


def test_a_difference_where_eagers_best_two_are_within_orts_error_is_a_tie() -> None:
    """ORT 2e-6 off eager (within tolerance), eager's best two 3e-6 apart: a tie. The same
    gap with ORT off by more than the tolerance is the export's difference."""
    eager = ([0, 0], [_logits(2.0, 1.0), _logits(1.0, 1.0 - 3e-6)])
    ort = ([0, 1], [_logits(2.0, 1.0), _logits(1.0 - 2e-6, 1.0)])
    found = generation.compare(eager, ort, TOLERANCE)
    assert found.first_difference == 1
    assert found.tie_gap == pytest.approx(3e-6, rel=0.02)  # float32 rounding of 1 - 3e-6
    assert found.ok
    far = ([0, 1], [_logits(2.0, 1.0), _logits(0.5, 1.0)])
    assert not generation.compare(eager, far, TOLERANCE).ok


def test_the_loop_picks_what_eager_generate_picks() -> None:
    torch.manual_seed(0)
    lm = build_lm("qwen2", "causal-lm")
    ids = generation.prompt(lm)
    tokens, logits = generation.greedy(generation.eager_step(lm), ids)
    with torch.no_grad():
        out = lm.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=16,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    assert tokens == out.sequences[0, ids.shape[1] :].tolist()
    assert len(tokens) == generation.NEW_TOKENS
    for mine, theirs in zip(logits, out.logits, strict=True):
        torch.testing.assert_close(mine, theirs[0].float())


@pytest.fixture(scope="module")
def qwen2_cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Record]]:
    """The dynamic qwen2 decode cell under each exporter, run once for the module's tests
    (its run directory and record; the graphs kept)."""
    found = {}
    for exporter in ("dynamo", "transformers"):
        run_dir = tmp_path_factory.mktemp(exporter)
        cell = Cell("hf.qwen2.decode", exporter, 18, dynamic=True)
        task = CellTask(cell, str(DECODERS), "t", str(run_dir), keep_onnx=True)
        found[exporter] = (run_dir, run_cell(task))
    return found


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "transformers"])
def test_a_decode_cell_generates_eagers_tokens_in_ort(
    exporter: str, qwen2_cells: dict[str, tuple[Path, Record]]
) -> None:
    _, record = qwen2_cells[exporter]
    assert record.status is Status.OK, record.error_message
    found = record.numerics.generation
    assert found is not None and found.agree == generation.NEW_TOKENS
    assert len(found.max_logits_abs) == generation.NEW_TOKENS
    assert max(found.max_logits_abs) < 1e-4
    assert found.ort_tokens == found.eager_tokens and len(found.ort_tokens or []) == 16
    parts = record.numerics.components
    if exporter == "transformers":
        assert parts is not None and set(parts) == {"prefill", "decode"}
        assert all(p.ok and p.checks[0].name.endswith(".logits") for p in parts.values())
        assert record.ort.latency is parts["decode"].ort_latency_ms
        _same_as_the_plain_script(record)
    else:
        assert parts is None


def _same_as_the_plain_script(record: Record) -> None:
    """benchmarks/plain_generate.py in a fresh process (transformers' own `generate`, its
    forward through transformers' ORT runners) on the harness's prompt: the same graphs
    (op counts summed over the components) and the same tokens, eager's and ORT's."""
    prompt = ",".join(str(t) for t in generation.prompt(build_lm("qwen2", "causal-lm"))[0].tolist())
    done = subprocess.run(
        [sys.executable, str(PLAIN), "--model", record.model, "--prompt", prompt],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
        cwd=REPO,
    )
    plain = json.loads(done.stdout.strip().splitlines()[-1])
    assert plain["components"] == ["prefill", "decode"]
    summed: Counter[str] = Counter()
    for ops in plain["ops"].values():
        summed.update(ops)
    assert record.export.onnx_ops == dict(sorted(summed.items()))
    found = record.numerics.generation
    assert found is not None
    assert plain["eager"] == found.eager_tokens and plain["ort"] == found.ort_tokens


@pytest.mark.slow
def test_a_graph_that_generates_other_tokens_fails_at_numerics(
    qwen2_cells: dict[str, tuple[Path, Record]], tmp_path: Path
) -> None:
    """The dynamo graph of a decode entry, its logits negated in the saved ONNX model (a
    real graph ORT runs): the first token already differs."""
    run_dir, record = qwen2_cells["dynamo"]
    cell = record.cell
    path = run_dir / record.artifacts["onnx"]
    negated = _negate_output(path, "logits", tmp_path / "negated.onnx")
    spec = find_spec(str(DECODERS), "hf.qwen2.decode")
    torch.manual_seed(0)
    model = spec.build().eval()
    how = generation.recipe(spec, cell)
    assert how is not None
    ids, eager = generation.reference(model, how)
    from harness.cell.reference import build

    _, inputs = build(spec, "cpu")
    runner = OrtRunner(negated, 1, "cpu")
    ort = generation.graph_tokens(runner, model, spec, inputs, ids, how)
    m = Measurements()
    with pytest.raises(StageFailure) as failed:
        generation.require_same(eager, ort, None, m)
    assert failed.value.stage is Stage.NUMERICS
    assert str(failed.value.error).startswith("generated tokens differ from eager's\n")
    found = m.numerics.generation
    assert found is not None and found.first_difference == 0 and found.agree == 0


def _negate_output(path: Path, name: str, target: Path) -> Path:
    model = onnx.load(str(path))
    for node in model.graph.node:
        node.output[:] = [f"{name}_raw" if o == name else o for o in node.output]
    model.graph.node.append(helper.make_node("Neg", [f"{name}_raw"], [name]))
    onnx.save(model, str(target))
    return target


def test_a_model_eager_cannot_generate_with_is_a_harness_error_at_reference(
    tmp_path: Path,
) -> None:
    cell = Cell("no_vocabulary", "dynamo", 18, dynamic=True)
    record = run_cell(CellTask(cell, str(BROKEN), "t", str(tmp_path)))
    assert record.status is Status.HARNESS_ERROR
    assert record.stage is Stage.REFERENCE
    assert "vocab_size" in (record.error_message or "")


@pytest.mark.slow
def test_transformers_fusions_are_a_cell_setting_judged_token_by_token(tmp_path: Path) -> None:
    """`--ort-opt fusions` on transformers' exporter is its `OnnxConfig(ort_fusions="cpu")`:
    the components hold ORT's fused ops (counted here from the saved graphs), are judged
    and generate eager's tokens."""
    cell = Cell("hf.qwen2.decode", "transformers", 18, dynamic=True, ort_opt=OrtOpt.FUSIONS)
    record = run_cell(CellTask(cell, str(DECODERS), "t", str(tmp_path), keep_onnx=True))
    assert record.status is Status.OK, record.error_message
    saved = (tmp_path / record.artifacts["onnx"]).parent
    counted: Counter[str] = Counter()
    for name in ("prefill", "decode"):
        graph = onnx.load(str(saved / f"{name}.onnx"), load_external_data=False).graph
        counted.update(n.op_type for n in graph.node if n.domain == "com.microsoft")
    assert counted and record.ort.fused_ops == dict(sorted(counted.items()))
    assert record.ort.optimizers == ["exporter"]
    found = record.numerics.generation
    assert found is not None and found.ok and found.agree == generation.NEW_TOKENS


def test_a_component_that_differs_fails_naming_it_and_the_fused_ops() -> None:
    good = OutputCheck("prefill.logits", 0.0, 0.0, 0.0, 1e-4, 1e-5, ok=True)
    bad = OutputCheck("decode.logits", 2.5, 0.1, 0.3, 1e-4, 1e-5, ok=False, mismatches=7)
    found = {"prefill": ComponentCheck([good]), "decode": ComponentCheck([good, bad])}
    with pytest.raises(StageFailure) as failed:
        components.require_ok(found, {"GroupQueryAttention": 2})
    text = str(failed.value.error)
    assert (
        text.splitlines()[0] == "component decode: 1 of 2 outputs differ: values beyond tolerance"
    )
    assert "decode.logits: max_abs 2.5" in text
    assert text.endswith("fused ops: GroupQueryAttention x2")
    components.require_ok({"prefill": ComponentCheck([good])}, None)


def _traced(model_type: str) -> tuple[torch.nn.Module, torch.Tensor, dict[str, Any]]:
    """The decode entry's model as transformers' exporter takes it, the prompt, and the
    components transformers' `decompose_for_generation` traces from it (module, kwargs)."""
    from transformers.exporters.utils import decompose_for_generation

    from harness.exporters.hf import pretrained

    torch.manual_seed(0)
    model = pretrained(build_lm(model_type, "causal-lm"))
    assert model is not None
    ids = generation.prompt(model)
    traced = decompose_for_generation(
        model, {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    )
    return model, ids, traced


def test_a_multimodal_prefill_generates_through_its_language_model_and_lm_head() -> None:
    """Gemma 3 is split into `language_model`, `lm_head` and `decode` (no `prefill`): its
    first step is the language model on the prompt's traced embeddings, then the head.
    The components' eager modules stand in for their ORT runners here (the same call
    signature); the decode suite's run judges the exported graphs."""
    model, ids, traced = _traced("gemma3")
    assert sorted(traced) == ["decode", "language_model", "lm_head"]
    runners = {name: module for name, (module, _) in traced.items()}
    kwargs = {name: kw for name, (_, kw) in traced.items()}
    tokens, _ = generation.greedy(generation.component_step(runners, kwargs), ids)
    eager_tokens, _ = generation.greedy(generation.eager_step(model), ids)
    assert tokens == eager_tokens
    without_head = {k: v for k, v in runners.items() if k != "lm_head"}
    with pytest.raises(KeyError, match="no component 'lm_head'"):
        generation.split_prefill(without_head, kwargs, ids)


@pytest.mark.parametrize("model_type", ["mamba", "lara_mini"])
def test_eager_is_left_untimed_where_its_cache_cannot_be_rolled_back(model_type: str) -> None:
    """Mamba's cache has no attention layer to count tokens in, LARA's linear-attention
    layers keep no past to crop: the decode component is then timed in ORT alone (it was a
    harness_error)."""
    _, _, traced = _traced(model_type)
    module, kwargs = traced["decode"]
    assert components._restoring_call(module, copy.deepcopy(kwargs)) is None


def test_a_cache_that_can_be_cropped_comes_back_to_its_length_after_each_timed_call() -> None:
    _, _, traced = _traced("qwen2")
    module, kwargs = traced["decode"]
    kwargs = copy.deepcopy(kwargs)
    length = kwargs["cache"].get_seq_length()
    call = components._restoring_call(module, kwargs)
    assert call is not None
    call()
    assert kwargs["cache"].get_seq_length() == length
