from __future__ import annotations

import json

import pytest

from harness.store.error_text import error_signature
from harness.store.records import (
    SCHEMA,
    Cell,
    Latency,
    Measurements,
    OutputCheck,
    Record,
    SchemaError,
    ShapeLatency,
)

CELL = Cell("mlp", "dynamo", 18, "cpu", True, "base", family="seed")


def _ok_record() -> Record:
    m = Measurements(
        opset_actual=18,
        export_s=1.5,
        export_phases={"capture": 0.5, "translate": 1.0},
        export_peak_rss_mb=12.5,
        numerics=[OutputCheck("output_0", 1e-6, 1e-5, 1e-7, 1e-4, 1e-5, True)],
        ort_latency_ms=Latency.from_samples([1.0, 2.0, 3.0]),
        eager_latency_ms=Latency.from_samples([4.0, 6.0, 8.0]),
    )
    return Record.finished(CELL, "run1", m)


def test_speedup_is_eager_p50_over_ort_p50() -> None:
    assert _ok_record().speedup == pytest.approx(6.0 / 2.0)


def test_round_trip_through_json() -> None:
    record = _ok_record()
    again = Record.from_json(record.to_json())
    assert again == record
    assert again.ort_latency_ms is not None and again.ort_latency_ms.samples == (1.0, 2.0, 3.0)


def test_missing_values_are_null_not_zero() -> None:
    record = Record.without_run(CELL, "run1", status="timeout", reason="no result after 5 s")
    d = json.loads(record.to_json())
    assert d["export_s"] is None and d["ort_latency_ms"] is None and d["speedup"] is None
    assert d["status"] == "timeout" and d["error_signature"].startswith("timeout: ")


def test_contract_fields_present() -> None:
    fields = set(json.loads(_ok_record().to_json()))
    contract = {
        "schema",
        "run_id",
        "model",
        "family",
        "exporter",
        "opset",
        "opset_actual",
        "device",
        "dynamic",
        "variant",
        "status",
        "stage",
        "error_type",
        "error_message",
        "error_signature",
        "export_s",
        "export_phases",
        "export_peak_rss_mb",
        "export_peak_cuda_mb",
        "onnx_bytes",
        "onnx_nodes",
        "onnx_ops",
        "aten_ops",
        "unsupported_ops",
        "numerics",
        "ort_session_s",
        "ort_latency_ms",
        "eager_latency_ms",
        "speedup",
        "attempt",
        "worker",
        "duration_s",
        "artifacts",
    }
    assert contract <= fields


def test_newer_schema_is_refused() -> None:
    d = json.loads(_ok_record().to_json())
    d["schema"] = SCHEMA + 1
    with pytest.raises(SchemaError, match="newer"):
        Record.from_dict(d)


def test_failed_record_keeps_root_cause_signature() -> None:
    try:
        try:
            raise KeyError("aten.cummax.default at 0x7f00 in /tmp/x.py line 12")
        except KeyError as inner:
            raise RuntimeError("Failed to convert the exported program") from inner
    except RuntimeError as outer:
        record = Record.finished(
            CELL, "r", Measurements(), status="export_failed", stage="translate", error=outer
        )
    assert record.error_type == "RuntimeError"
    assert record.error_signature == "KeyError: 'aten.cummax.default at 0x? in <path> line N'"
    assert "Caused by KeyError" in (record.error_message or "")


def test_error_signature_groups_messages_differing_in_numbers() -> None:
    a = error_signature("ValueError", "shape [2, 3] does not match [4, 5]")
    b = error_signature("ValueError", "shape [7, 1] does not match [8, 9]")
    assert a == b


def test_a_schema_2_record_reads_as_schema_3_with_no_repro_and_no_stage() -> None:
    d = json.loads(_ok_record().to_json())
    d["schema"] = 2
    d.pop("minimal_repro"), d.pop("mismatch_stage")
    record = Record.from_dict(d)
    assert (record.schema, record.minimal_repro, record.mismatch_stage) == (3, None, None)
    assert record.export_s == 1.5


def test_a_minimal_repro_and_a_mismatch_stage_survive_the_round_trip() -> None:
    repro = {"kind": "export", "reproduces": True, "nodes_before": 600, "nodes_after": 3}
    stage = {"stage": "capture", "checks": [{"stage": "capture", "ok": False, "max_abs": 2.0}]}
    record = _ok_record().with_changes(minimal_repro=repro, mismatch_stage=stage)
    back = Record.from_json(record.to_json())
    assert (back.minimal_repro, back.mismatch_stage) == (repro, stage)


def test_signature_of_a_raised_error_is_its_root_causes() -> None:
    from harness.store.error_text import signature_of

    try:
        try:
            raise KeyError("aten.cummax.default at 0x7f00")
        except KeyError as inner:
            raise RuntimeError("Failed to convert") from inner
    except RuntimeError as outer:
        assert signature_of(outer) == "KeyError: 'aten.cummax.default at 0x?'"


def test_a_patched_cell_timed_at_named_shapes_round_trips() -> None:
    cell = Cell(
        "hf.llama.decode", "dynamo", 18, "cpu", True, family="transformers-decode", patch="p"
    )
    decode = ShapeLatency.of({"batch": 1, "past": 32}, [1.0, 2.0, 3.0], [3.0, 4.0, 5.0])
    m = Measurements(shape_latency={"decode_step": decode})
    record = Record.finished(cell, "run1", m)
    again = Record.from_json(record.to_json())
    assert again == record and again.cell == cell and again.cell.key[-1] == "p"
    assert again.shape_latency is not None
    assert again.shape_latency["decode_step"].speedup == pytest.approx(4.0 / 2.0)
    assert again.shape_latency["decode_step"].sizes == {"batch": 1, "past": 32}
    assert cell.cell_id.endswith("--base--patch-p") and "[patch p]" in cell.label()


def test_a_record_written_before_patches_is_a_plain_call() -> None:
    d = json.loads(_ok_record().to_json())
    del d["patch"], d["shape_latency"]
    again = Record.from_dict(d)
    assert again.patch == "none" and again.shape_latency is None
    assert again.cell.key == CELL.key
