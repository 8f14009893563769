"""ONNX Runtime's model builders as exporters (issue 49; harness/exporters/builder.py): real
builds of the decode suite's tiny models with onnxruntime-genai's builder and mobius, the
graphs judged like any cell (prefill and decode-step numerics, 16 greedy tokens through the
harness's loop and through onnxruntime_genai's Generator, a left-padded batch), checked
against a plain script (benchmarks/plain_builder.py); an architecture or a precision a
builder refuses is a skip with its words; a builder's crash is a record with its last lines.
Each build is a real subprocess of 10-40 s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import exporters
from harness.cell import generation
from harness.runtime.worker import run_cell
from harness.store.measures import Generation
from harness.store.records import Cell, CellTask, Dtype, Record
from harness.store.status import Stage, Status
from model_zoo.transformers._decode import build_lm

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DECODERS = REPO / "model_zoo" / "transformers" / "decoders.py"
TINY = REPO / "tests" / "zoo_fixtures" / "precision" / "models.py"
PLAIN = REPO / "benchmarks" / "plain_builder.py"
BUILDERS = ("genai-builder", "mobius")


def _cell(tmp: Path, model: str, exporter: str, **changes: object) -> Record:
    cell = Cell(model, exporter, 18, dynamic=True, family="transformers-decode", **changes)
    return run_cell(CellTask(cell, str(DECODERS), "t", str(tmp), timeout_s=600))


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Record]:
    """hf.llama.decode built by each builder, in real cells."""
    tmp = tmp_path_factory.mktemp("builders")
    return {b: _cell(tmp, "hf.llama.decode", b) for b in BUILDERS}


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_built_llama_is_judged_like_any_graph(llama: dict[str, Record], builder: str) -> None:
    r = llama[builder]
    assert r.status is Status.OK, r.error_message
    assert r.export.phases is not None and set(r.export.phases) == {"checkpoint", "build"}
    assert r.export.seconds == pytest.approx(sum(r.export.phases.values()), rel=1e-3)
    # the builder's own process: torch and transformers imported, the checkpoint read
    assert r.export.peak_rss_mb is not None and r.export.peak_rss_mb > 150
    # ORT's own ops, a fact of the record (the graph is not given to onnx.checker)
    assert r.ort.fused_ops is not None and r.ort.fused_ops["GroupQueryAttention"] == 2
    assert r.ort.optimizers == ["exporter"]
    # judged at the prefill and the decode step, not at the example (3 tokens after a past)
    names = [c.name for c in r.numerics.checks or []]
    assert names[0] == "logits@batch=1,past=0,sequence=4"
    assert "logits@batch=3,past=9,sequence=1" in names
    assert all(c.max_abs is not None and c.max_abs < 1e-4 for c in r.numerics.checks or [])
    assert r.shape_latency is not None and set(r.shape_latency) == {"decode_step", "prefill"}
    assert r.export.onnx_bytes is not None and r.export.onnx_bytes > 500_000  # weights


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_built_llama_generates_eagers_tokens_every_way(
    llama: dict[str, Record], builder: str
) -> None:
    r = llama[builder]
    assert r.numerics.generation is not None
    assert (r.numerics.generation.agree, r.numerics.generation.new_tokens) == (16, 16)
    found = r.numerics.generations or {}
    assert set(found) == {"batched", "genai", "genai-batched"}
    single = found["genai"]
    assert single.ok and single.ort_tokens == r.numerics.generation.eager_tokens
    for name in ("batched", "genai-batched"):
        batch: Generation = found[name]
        # GroupQueryAttention reads each row's length: the rows are fed padded on the right
        assert (batch.lengths, batch.padding) == ([8, 3, 5], "right")
        assert batch.ok, (name, batch)


def test_the_genai_builder_agrees_with_a_plain_script(llama: dict[str, Record]) -> None:
    """The builder's command, ORT and the Generator, no harness code (eager through
    transformers' own `generate`): the same tokens and the same graph."""
    r = llama["genai-builder"]
    prompt = generation.prompt(build_lm("llama", "causal-lm"))[0].tolist()
    done = subprocess.run(
        [sys.executable, str(PLAIN), "--model", "hf.llama.decode", "--builder", "genai-builder",
         "--prompt", ",".join(map(str, prompt))],
        capture_output=True, text=True, timeout=600, check=True, cwd=REPO,
    )  # fmt: skip
    plain = json.loads(done.stdout.strip().splitlines()[-1])
    g = r.numerics.generation
    assert g is not None and plain["built"]
    assert plain["eager"] == g.eager_tokens == plain["ort"] == g.ort_tokens == plain["generator"]
    assert plain["ops"] == r.export.onnx_ops
    assert plain["prompt_max_abs"] < 1e-4


def test_an_architecture_the_builder_does_not_support_is_skipped_in_its_words(
    tmp_path: Path,
) -> None:
    r = _cell(tmp_path, "hf.gpt2.decode", "genai-builder")
    assert r.status is Status.SKIPPED
    assert r.reason == (
        "the genai builder: NotImplementedError: The GPT2LMHeadModel model is not currently supported."
    )


def test_a_precision_the_builder_does_not_build_for_the_device_is_skipped(tmp_path: Path) -> None:
    """The genai builder writes a float16 graph for the CPU without a word (its decode step
    then fails in ORT); its own list of valid combinations says it does not build one."""
    r = _cell(tmp_path, "hf.llama.decode", "genai-builder", dtype=Dtype.FLOAT16)
    assert r.status is Status.SKIPPED
    assert r.reason is not None and r.reason.startswith(
        "the genai builder: fp16 on cpu is not among its Valid precision + execution provider"
    )


def test_a_builder_that_fails_is_a_record_with_its_last_lines(tmp_path: Path) -> None:
    """mobius's command reads Gemma 2's config through its generic architecture config and
    fails on an attribute that config lacks: an export failure, the builder's traceback."""
    r = _cell(tmp_path, "hf.gemma2.decode", "mobius")
    assert (r.status, r.stage) == (Status.EXPORT_FAILED, Stage.TRANSLATE)
    assert r.error_type == "ProgramFailed"
    message = r.error_message or ""
    assert message.splitlines()[0] == (
        "AttributeError: 'ArchitectureConfig' object has no attribute 'query_pre_attn_scalar'"
    )
    assert "Traceback" in message or "File " in message  # the builder's own last lines


def test_models_a_builder_does_not_take_are_skipped_before_any_build(tmp_path: Path) -> None:
    task = CellTask(Cell("dense", "mobius", 18), str(TINY), "t", str(tmp_path))
    assert run_cell(task).reason == "mobius builds from a transformers checkpoint, not a Dense"
    static = run_cell(
        CellTask(Cell("hf.llama.decode", "genai-builder", 18), str(DECODERS), "t", str(tmp_path))
    )
    assert static.status is Status.SKIPPED
    assert static.reason == (
        "the genai builder writes a graph of any batch and length: it runs in dynamic cells"
    )


def test_the_builders_are_in_the_registry_and_never_warmed_up() -> None:
    for name in BUILDERS:
        found = exporters.get(name)
        assert not found.in_process and found.unavailable() is None
        assert found.sample() is None
