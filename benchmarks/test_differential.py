"""The differential check over the whole built-in zoo (issue 13): every model, each
exporter, opset 18, static and dynamic, the harness's cell against a direct
torch.onnx.export in a fresh plain process: the same verdict and the same graph."""

from __future__ import annotations

from pathlib import Path

from benchmarks.conftest import Figures, harness
from benchmarks.differential import compare_run, markdown

FAMILIES = "family:vision,family:nlp,family:audio,family:seed,family:hf,family:exportable,family:large,family:ops"


def _differential(benchmark, figures: Figures, out: Path, title: str, *args: str) -> None:  # type: ignore[no-untyped-def]
    """`harness run ARGS --keep-onnx` timed once, then each cell against the plain way."""
    run = ("run", *args, "--keep-onnx", "--out", str(out), "--no-report")
    benchmark.pedantic(lambda: harness(*run), rounds=1, iterations=1)
    rows = compare_run(out)
    agree = sum(r.agrees for r in rows)
    benchmark.extra_info.update(cells=len(rows), agree=agree)
    figures.add(title, markdown(rows).splitlines())
    assert agree == len(rows), markdown(rows)


def test_differential_over_the_builtin_zoo(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _differential(
        benchmark,
        figures,
        tmp_path / "zoo",
        "Differential check (harness vs direct export)",
        *("--models", FAMILIES, "--exporters", "dynamo,torchscript,torchscript-script"),
        *("--opsets", "18", "--dynamic"),
    )


PRECISION_MODELS = "resnet_small,mobilenet_v2_small,vit_tiny,convnext_small,hf.bert,hf.llama"


def test_differential_of_reduced_precision_and_ort_optimisations(  # type: ignore[no-untyped-def]
    benchmark, figures: Figures, tmp_path: Path
) -> None:
    """Issue 36's axes against a plain export, dtype cast and ORT session per cell: 6 models
    x both exporters x float16/bfloat16 x default/none/fusions (72 cells, about 12 min)."""
    _differential(
        benchmark,
        figures,
        tmp_path / "axes",
        "Differential check, dtypes and ORT optimisations",
        *("--models", PRECISION_MODELS, "--exporters", "dynamo,torchscript"),
        *("--opsets", "18", "--static-only", "--dtypes", "float16,bfloat16"),
        *("--ort-opt", "default,none,fusions", "--repro-bound", "0"),
    )


# One head per task, twelve tasks: each input layout the task zoo makes (choices, boxes,
# eos, images whose size moves, raw audio, speech features with decoder ids, a grid VLM).
TASK_HEADS = (
    "hf.bert.multiple-choice,hf.layoutlm.token-classification,hf.bart.sequence-classification,"
    "hf.convnext.image-classification,hf.wav2vec2.ctc,hf.speech_to_text.speech-seq2seq,"
    "hf.qwen2_vl.image-text-to-text,hf.distilbert.question-answering,hf.roberta.fill-mask,"
    "hf.detr.object-detection,hf.owlvit.zero-shot-object-detection,hf.wav2vec2.audio-classification"
)


def test_differential_of_task_heads(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Issue 35's heads against a direct export in a fresh process: 12 heads over 12 tasks,
    both exporters, opset 18, static and dynamic (48 cells)."""
    _differential(
        benchmark,
        figures,
        tmp_path / "tasks",
        "Differential check, task heads",
        *("--suite", "transformers-tasks", "--models", TASK_HEADS),
        *("--opsets", "18", "--dynamic", "--repro-bound", "0"),
    )
