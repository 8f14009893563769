"""transformers' own exporter as a cell (issue 40): the call a Hugging Face user makes on
the zoo's PreTrainedModel, judged like any cell, and checked against a plain script in a
fresh process (tests/exporters/plain_hf_export.py). Real transformers, real exports, real ORT."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import exporters
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask
from harness.store.status import Status

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURES = REPO / "model_zoo" / "transformers" / "architectures.py"
PLAIN = Path(__file__).resolve().parent / "plain_hf_export.py"
TINY = REPO / "tests" / "zoo_fixtures" / "precision" / "models.py"


@pytest.mark.slow
def test_a_bert_cell_is_what_a_direct_transformers_export_gives(tmp_path: Path) -> None:
    cell = Cell("hf.bert", "transformers", 18)
    record = run_cell(CellTask(cell, str(ARCHITECTURES), "t", str(tmp_path)))
    done = subprocess.run(
        [sys.executable, str(PLAIN), str(ARCHITECTURES), "hf.bert", "18"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=REPO,
    )
    plain = json.loads(done.stdout.strip().splitlines()[-1])
    assert record.status is Status.OK, record.error_message
    assert record.export.onnx_ops == plain["ops"]
    checks = record.numerics.checks or []
    assert [c.name for c in checks] == ["last_hidden_state", "pooler_output"]
    assert len(checks) == plain["outputs"]
    for check, plain_abs in zip(checks, plain["max_abs"], strict=True):
        assert check.max_abs == pytest.approx(plain_abs, rel=1e-6, abs=1e-9)
    assert record.export.phases is not None and set(record.export.phases) == {"translate", "save"}


def test_a_model_that_is_no_pretrained_model_is_skipped_naming_why(tmp_path: Path) -> None:
    record = run_cell(CellTask(Cell("dense", "transformers", 18), str(TINY), "t", str(tmp_path)))
    assert record.status is Status.SKIPPED
    assert record.reason == "transformers' exporter takes a PreTrainedModel, not a Dense"


def test_a_transformers_without_exporters_skips_its_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transformers older than 5.13 cannot be installed beside this one: the import of
    `transformers.exporters` is made to fail (None in sys.modules), nothing else."""
    assert exporters.get("transformers").unavailable() is None
    monkeypatch.setitem(sys.modules, "transformers.exporters", None)
    reason = exporters.get("transformers").unavailable()
    assert reason is not None
    assert reason.endswith(
        "has no transformers.exporters (it came in 5.13): pip install -U 'transformers>=5.13'"
    )


TASKS = REPO / "model_zoo" / "transformers" / "tasks.py"


def test_a_model_fed_more_than_text_generates_from_its_own_inputs() -> None:
    """A language model generates from the harness's prompt; Whisper from its audio
    features, a VLM from its images and the text holding their tokens, as users call it."""
    import torch

    from harness.cell.generation import PROMPT_TOKENS
    from harness.exporters.hf import generation_inputs
    from model_zoo.transformers._task_build import build_head

    whisper = build_head("whisper", "WhisperForConditionalGeneration")
    features = torch.randn(2, 80, 3000)
    assert generation_inputs(whisper, {"input_features": features}) == {"input_features": features}
    text = {"input_ids": torch.zeros(2, 16, dtype=torch.int64)}
    prompt = generation_inputs(whisper, {**text, "attention_mask": torch.ones(2, 16)})
    assert set(prompt) == {"input_ids", "attention_mask"}
    assert prompt["input_ids"].shape == (1, PROMPT_TOKENS)


@pytest.mark.slow
def test_whisper_exports_for_generation_from_its_audio_and_each_component_is_judged(
    tmp_path: Path,
) -> None:
    cell = Cell("hf.whisper.speech-seq2seq", "transformers", 18, family="transformers-tasks")
    record = run_cell(CellTask(cell, str(TASKS), "t", str(tmp_path)))
    assert record.status is Status.OK, record.error_message
    components = record.numerics.components or {}
    assert list(components) == ["prefill", "decode"]
    for name, check in components.items():
        assert check.ok and check.checks, name
        # Each component runs on the audio: the encoder's output is one of its outputs.
        assert f"{name}.encoder_last_hidden_state" in {c.name for c in check.checks}


@pytest.mark.parametrize("model_type", ["t5", "encoder-decoder"])
def test_a_seq2seq_decoder_step_exports_for_generation_from_the_source_text(
    model_type: str,
) -> None:
    """The decode suite's seq2seq entries are one step of a decoder (decoder ids and the
    encoder's states): a user generates from the source text, so the export does. T5's
    config names no token to start decoding from (its checkpoints' generation config starts
    from padding) and an EncoderDecoderModel's leaves it to its user: both start from the
    padding token (generate refused them before)."""
    import torch
    from transformers.exporters.utils import decompose_for_generation

    from harness.cell.generation import PROMPT_TOKENS
    from harness.exporters.hf import generation_inputs
    from model_zoo.transformers._decode import build_lm

    model = build_lm(model_type, "seq2seq-lm")
    assert model.generation_config.decoder_start_token_id == 0  # both decoders pad with 0
    step = {
        "input_ids": torch.zeros(1, 1, dtype=torch.int64),
        "encoder_hidden_states": torch.randn(1, 16, 8),
        "encoder_attention_mask": torch.ones(1, 16, dtype=torch.int64),
    }
    source = generation_inputs(model, step)
    assert set(source) == {"input_ids", "attention_mask"}
    assert source["input_ids"].shape == (1, PROMPT_TOKENS)
    traced = decompose_for_generation(model, source)
    assert list(traced) == ["prefill", "decode"]
    assert "encoder_outputs" in traced["decode"][1]
