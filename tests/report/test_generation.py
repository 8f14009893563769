"""Generation-shaped runs in the report (harness/report/generation.py): latency at named
shapes (a decode step, a prefill) drawn and tabled per model, and, in a run with patches,
each model's outcome: plain, only patched (which patch), or not at all. Hand-made records,
hand-checked numbers."""

from __future__ import annotations

import pytest

from harness.report import build_report, unique_cells
from harness.report.generation import (
    generation_latency_data,
    patch_outcome,
    patches_section,
    timed_shapes,
)
from harness.report.markdown import render_markdown
from harness.store.records import Cell, Record, ShapeLatency
from harness.store.status import Status
from tests.fixtures_compare import measurements
from tests.report.test_report_synthetic import failed, lat, typed_manifest

FAMILY = "transformers-decode"
DECODE = {"batch": 1, "sequence": 1, "past": 32}
PREFILL = {"batch": 1, "sequence": 32, "past": 0}


def _cell(model: str, exporter: str = "dynamo", patch: str = "none") -> Cell:
    return Cell(model, exporter, 18, dynamic=True, family=FAMILY, patch=patch)


def _timed(c: Cell, decode: tuple[float, float], prefill: tuple[float, float]) -> Record:
    """An ok cell: (ORT, eager) p50 in ms at each named shape."""
    shapes = {
        "decode_step": ShapeLatency(DECODE, lat(decode[0]), lat(decode[1]), decode[1] / decode[0]),
        "prefill": ShapeLatency(PREFILL, lat(prefill[0]), lat(prefill[1]), prefill[1] / prefill[0]),
    }
    m = measurements(
        export_s=5.0,
        ort_latency_ms=shapes["decode_step"].ort_latency_ms,
        eager_latency_ms=shapes["decode_step"].eager_latency_ms,
        shape_latency=shapes,
    )
    return Record.finished(c, "decode-run", m)


def decode_records() -> list[Record]:
    """llama works plain; gemma2 only with the sliding-window patch; t5 with nothing; the
    TorchScript cells cannot take the cache."""
    cache_error = RuntimeError("TorchScript cannot take DynamicCache as an input")
    length = ValueError("tracing specialised a dynamic dimension")
    records = [
        _timed(_cell("hf.llama.decode"), decode=(0.1, 0.8), prefill=(0.2, 1.0)),
        _timed(_cell("hf.llama.decode", patch="sliding-window"), (0.1, 0.8), (0.2, 1.0)),
        failed(_cell("hf.gemma2.decode"), "capture", length),
        _timed(_cell("hf.gemma2.decode", patch="sliding-window"), (0.25, 1.0), (0.5, 1.5)),
        failed(_cell("hf.t5.decode-seq2seq"), "translate", ValueError("Cannot view")),
        failed(_cell("hf.t5.decode-seq2seq", patch="sliding-window"), "translate", ValueError("x")),
    ]
    records += [
        failed(_cell(model, "torchscript", patch), "capture", cache_error)
        for model in ("hf.llama.decode", "hf.gemma2.decode", "hf.t5.decode-seq2seq")
        for patch in ("none", "sliding-window")
    ]
    return [r.with_changes(run_id="decode-run") for r in records]


def test_the_timed_shapes_are_drawn_per_model_and_shape() -> None:
    data = generation_latency_data(decode_records())
    assert timed_shapes(decode_records()) == ["decode_step", "prefill"]
    assert data.rows == (
        "hf.gemma2.decode (dynamic) · decode_step",
        "hf.gemma2.decode (dynamic) · prefill",
        "hf.llama.decode (dynamic) · decode_step",
        "hf.llama.decode (dynamic) · prefill",
    )
    # Series: each exporter with its patch; gemma2 has ORT figures only patched.
    assert data.series == (
        "dynamo",
        "dynamo [patch sliding-window]",
        "torchscript",
        "torchscript [patch sliding-window]",
    )
    gemma_decode = data.ort_ms[0]
    assert gemma_decode[0] is None and gemma_decode[1] is not None
    assert gemma_decode[1].p50 == pytest.approx(0.25)
    assert data.eager_ms[1] is not None and data.eager_ms[1].p50 == pytest.approx(1.5)
    speedup = data.speedup[2][0]
    assert speedup is not None and speedup.p50 == pytest.approx(0.8 / 0.1)
    assert not data.is_empty and data.omitted == 0


def test_a_run_without_named_shapes_draws_nothing() -> None:
    plain = [r.with_changes(shape_latency=None) for r in decode_records()]
    assert generation_latency_data(plain).is_empty


def test_each_model_works_plain_only_patched_or_not_at_all() -> None:
    by = {(r.model, r.exporter, r.patch): r for r in decode_records()}

    def outcome(model: str, exporter: str = "dynamo") -> str:
        return patch_outcome([r for k, r in by.items() if k[:2] == (model, exporter)])

    assert outcome("hf.llama.decode") == "plain"
    assert outcome("hf.gemma2.decode") == "only patched: sliding-window"
    assert outcome("hf.t5.decode-seq2seq") == "not at all"
    skipped = Record.without_run(_cell("m"), "r", status=Status.SKIPPED, reason="no lib")
    assert patch_outcome([skipped]) == "not run"


def test_the_report_of_a_decode_run_has_both_sections() -> None:
    records = decode_records()
    assert len(unique_cells(records)) == len(records), "a patched cell is a cell of its own"
    section = patches_section(records)
    assert section is not None
    summary = section.blocks[0]
    assert [tuple(t.text for t in row) for row in summary.rows] == [  # type: ignore[union-attr]
        ("plain", "1", "0"),
        ("only patched: sliding-window", "1", "0"),
        ("not at all", "1", "3"),
    ]
    text = render_markdown(build_report(typed_manifest("decode-run"), records))
    assert "## Plain, only patched, or not at all" in text
    assert "### decode_step (batch 1, past 32, sequence 1): ORT p50 / eager p50 in ms" in text
    assert "| hf.llama.decode (dynamic) | 0.10 / 0.80 (8.00×) |" in text
    assert patches_section([r for r in records if r.patch == "none"]) is None
