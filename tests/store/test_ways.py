"""Every way side by side (harness/store/ways.py), pure: hand-made records of one
architecture under four exporters, the ratios and counts computed by hand."""

from __future__ import annotations

from harness.store.measures import (
    ComponentCheck,
    ExportMeasures,
    Generation,
    Latency,
    Numerics,
    OutputCheck,
    ShapeLatency,
)
from harness.store.records import Cell, Record
from harness.store.status import Status
from harness.store.ways import of_records, summary, tokens_text

ARCH = "hf.llama.decode"
OK = OutputCheck("logits", 1e-7, 1e-6, 1e-8, 1e-4, 1e-5, True)
DIFFERS = OutputCheck("logits", 0.3, 0.5, 0.1, 1e-4, 1e-5, False)


def _shapes(prefill: float, decode: float) -> dict[str, ShapeLatency]:
    return {
        "prefill": ShapeLatency.of({"sequence": 32}, [prefill] * 3, [1.0] * 3),
        "decode_step": ShapeLatency.of({"past": 32}, [decode] * 3, [1.0] * 3),
    }


def _tokens(agree: int, first: int | None = None) -> Generation:
    return Generation(16, agree, first, [0.0] * (agree + (first is not None)))


def _record(
    exporter: str,
    status: Status,
    *,
    shapes: dict[str, ShapeLatency] | None = None,
    numerics: Numerics | None = None,
    exported: bool = True,
    model: str = ARCH,
) -> Record:
    cell = Cell(model, exporter, 18, dynamic=True)
    export = (
        ExportMeasures(seconds=1.0, onnx_bytes=1000, onnx_nodes=10)
        if exported
        else ExportMeasures()
    )
    found = numerics or Numerics()
    return Record(cell, "r", status, export=export, numerics=found, shape_latency=shapes)


def _records() -> list[Record]:
    batched = Generation(16, 3, 3, [0.0] * 4, lengths=[8, 3, 5], padding="left", row=2)
    builder = Numerics(
        checks=[OK],
        generation=_tokens(16),
        generations={"batched": _tokens(16), "genai": _tokens(16)},
    )
    component = ComponentCheck([OK], Latency.from_samples([0.5]), None)
    return [
        _record("dynamo", Status.OK, shapes=_shapes(0.4, 0.2),
                numerics=Numerics(checks=[OK], generation=_tokens(16), generations={"batched": batched})),
        _record("genai-builder", Status.OK, shapes=_shapes(0.2, 0.05), numerics=builder),
        _record("mobius", Status.NUMERICS_MISMATCH, shapes=None,
                numerics=Numerics(checks=[DIFFERS])),
        _record("transformers", Status.OK,
                numerics=Numerics(components={"prefill": component, "decode": component},
                                  generation=_tokens(16))),
        _record("torchscript", Status.SKIPPED, exported=False),
        _record("dynamo", Status.OK, model="alone", shapes=_shapes(1.0, 1.0)),
    ]  # fmt: skip


def test_ways_are_ordered_and_timed_against_the_fastest_at_each_shape() -> None:
    (arch,) = of_records(_records())  # `alone` has one way only; the skipped cell is left out
    assert [w.exporter for w in arch.ways] == ["dynamo", "transformers", "genai-builder", "mobius"]
    dynamo, hf, genai, mobius = arch.ways
    assert dynamo.ratio == {"prefill": 2.0, "decode_step": 4.0}  # 0.4 / 0.2, 0.2 / 0.05
    assert genai.ratio == {"prefill": 1.0, "decode_step": 1.0}
    # transformers' components: timed at their own shapes, no ratio
    assert hf.facts.own_shapes and hf.facts.p50_ms == {"prefill": 0.5, "decode_step": 0.5}
    assert hf.ratio == {} and mobius.ratio == {}
    assert (hf.facts.numerics, mobius.facts.numerics) == (True, False)


def test_per_exporter_each_verdict_counts_where_it_was_checked() -> None:
    found = {s.exporter: s for s in summary(of_records(_records()))}
    dynamo = found["dynamo"]
    assert dynamo.holds == {"exported": 1, "numerics": 1, "tokens": 1, "batched": 0, "genai": 0}
    assert dynamo.checked == {"exported": 1, "numerics": 1, "tokens": 1, "batched": 1, "genai": 0}
    assert dynamo.median_ratio == {"prefill": 2.0, "decode_step": 4.0}
    assert found["genai-builder"].holds["genai"] == 1
    assert found["mobius"].checked["tokens"] == 0 and found["mobius"].median_ratio == {}


def test_tokens_read_as_in_the_generation_section() -> None:
    assert tokens_text(None) == "-"
    assert tokens_text(_tokens(16)) == "16/16"
    batched = Generation(16, 3, 3, [0.0] * 4, lengths=[8, 3, 5], padding="left", row=2)
    assert tokens_text(batched) == "3/16, first at 3 (row 2)"
    assert tokens_text(Generation.failed("seqlens_k[1] = 2 is too small")) == (
        "error: seqlens_k[1] = 2 is too small"
    )


def test_a_way_timed_alone_at_a_shape_has_no_ratio() -> None:
    records = [
        _record("dynamo", Status.OK, shapes=_shapes(0.4, 0.2)),
        _record("mobius", Status.EXPORT_FAILED, exported=False),
    ]
    (arch,) = of_records(records)
    assert [w.ratio for w in arch.ways] == [{}, {}]
    assert summary([arch])[0].median_ratio == {}
