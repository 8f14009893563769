"""ONNX Runtime's model builders as exporters (issue 49; harness/exporters/builder.py), in
real cells: an architecture or a precision a builder refuses is a skip with its words; a
builder's crash is a record with its last lines. Each build is a real subprocess of 10-40 s.
The built Llama judged like any graph, generating eager's tokens and agreeing with a plain
script: tests/e2e/test_builders.py, on the builds of its run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import exporters
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Dtype, Record
from harness.store.status import Stage, Status

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DECODERS = REPO / "model_zoo" / "transformers" / "decoders.py"
TINY = REPO / "tests" / "zoo_fixtures" / "precision" / "models.py"
BUILDERS = ("genai-builder", "mobius")


def _cell(tmp: Path, model: str, exporter: str, **changes: object) -> Record:
    cell = Cell(model, exporter, 18, dynamic=True, family="transformers-decode", **changes)
    return run_cell(CellTask(cell, str(DECODERS), "t", str(tmp), timeout_s=600))


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
