from __future__ import annotations

import json

import pytest

from harness.store.error_text import error_signature
from harness.store.measures import PrecisionLoss
from harness.store.records import (
    SCHEMA,
    Cell,
    Dtype,
    Latency,
    Measurements,
    OutputCheck,
    Record,
    SchemaError,
    ShapeLatency,
)
from harness.store.validate import Malformed
from tests.fixtures_compare import changed, measurements

CELL = Cell("mlp", "dynamo", 18, "cpu", True, "base", family="seed")


def _ok_record() -> Record:
    m = measurements(
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
    assert again.ort.latency is not None and again.ort.latency.samples == (1.0, 2.0, 3.0)


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


def test_a_schema_2_record_reads_with_no_repro_and_no_stage() -> None:
    d = json.loads(_ok_record().to_json())
    d["schema"] = 2
    d.pop("minimal_repro"), d.pop("mismatch_stage")
    record = Record.from_dict(d)
    assert (record.minimal_repro, record.numerics.mismatch_stage) == (None, None)
    assert record.export.seconds == 1.5 and record.to_dict()["schema"] == SCHEMA == 6


def test_a_schema_5_record_reads_with_no_components_and_no_generation() -> None:
    d = json.loads(_ok_record().to_json())
    d["schema"] = 5
    d.pop("components"), d.pop("generation")
    record = Record.from_dict(d)
    assert (record.numerics.components, record.numerics.generation) == (None, None)


def test_a_generative_cells_components_and_tokens_survive_the_round_trip() -> None:
    check = {"name": "decode.logits", "max_abs": 1e-7, "max_rel": 1e-6, "rmse": 1e-8}
    check |= {"rtol": 1e-4, "atol": 1e-5, "ok": True}
    latency = {"samples": [1.0, 3.0], "p50": 2.0, "p90": 3.0, "p99": 3.0, "mean": 2.0}
    latency |= {"stdev": 1.0, "n": 2}
    d = json.loads(_ok_record().to_json())
    d["components"] = {"decode": {"checks": [check], "ort_latency_ms": latency}}
    d["generation"] = {"new_tokens": 16, "agree": 5, "first_difference": 5}
    d["generation"] |= {"max_logits_abs": [0.0] * 6, "tie_gap": 1e-6}
    record = Record.from_json(json.dumps(d))
    parts, tokens = record.numerics.components, record.numerics.generation
    assert parts is not None and parts["decode"].ok and parts["decode"].eager_latency_ms is None
    assert parts["decode"].ort_latency_ms is not None and parts["decode"].ort_latency_ms.p50 == 2.0
    assert tokens is not None and tokens.ok and tokens.first_difference == 5
    assert Record.from_json(record.to_json()) == record
    d["generation"]["agree"] = -1
    with pytest.raises(Malformed):
        Record.from_json(json.dumps(d))


def test_a_minimal_repro_and_a_mismatch_stage_survive_the_round_trip() -> None:
    repro = {"kind": "export", "reproduces": True, "nodes_before": 600, "nodes_after": 3}
    stage = {"stage": "capture", "checks": [{"stage": "capture", "ok": False, "max_abs": 2.0}]}
    record = changed(_ok_record(), minimal_repro=repro, mismatch_stage=stage)
    back = Record.from_json(record.to_json())
    assert back.minimal_repro is not None and back.numerics.mismatch_stage is not None
    assert (back.minimal_repro.to_dict(), back.numerics.mismatch_stage.to_dict()) == (repro, stage)
    assert back.numerics.mismatch_stage.checks is not None
    assert back.numerics.mismatch_stage.checks[0].max_abs == 2.0


def test_signature_of_a_raised_error_is_its_root_causes() -> None:
    from harness.store.error_text import signature_of

    with pytest.raises(RuntimeError) as outer:  # noqa: PT012 - a chained error, made here
        try:
            raise KeyError("aten.cummax.default at 0x7f00")
        except KeyError as inner:
            raise RuntimeError("Failed to convert") from inner
    assert signature_of(outer.value) == "KeyError: 'aten.cummax.default at 0x?'"


def test_a_patched_cell_timed_at_named_shapes_round_trips() -> None:
    cell = Cell(
        "hf.llama.decode", "dynamo", 18, "cpu", True, family="transformers-decode", patch="p"
    )
    decode = ShapeLatency.of({"batch": 1, "past": 32}, [1.0, 2.0, 3.0], [3.0, 4.0, 5.0])
    m = measurements(shape_latency={"decode_step": decode})
    record = Record.finished(cell, "run1", m)
    again = Record.from_json(record.to_json())
    assert again == record and again.cell == cell and again.cell.patch == "p"
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


# A line as a schema-3 harness wrote it (before the typed record): flat, with `speedup`
# stored, a sampled cell's summary, and no `patch`.
SCHEMA_3_LINE = (
    '{"schema": 3, "run_id": "old", "model": "opinfo.add.float32", "family": "opinfo",'
    ' "exporter": "dynamo", "opset": 18, "opset_actual": 18, "device": "cpu",'
    ' "dynamic": false, "variant": "base", "status": "numerics_mismatch",'
    ' "stage": "numerics", "error_type": "NumericsMismatch", "error_message": "1 of 1 differ",'
    ' "error_signature": "NumericsMismatch: 1 of 1 differ", "export_s": 0.5,'
    ' "export_phases": {"capture": 0.2, "translate": 0.3}, "export_peak_rss_mb": 80.0,'
    ' "export_peak_cuda_mb": null, "onnx_bytes": 1234, "onnx_nodes": 3,'
    ' "onnx_ops": {"Add": 3}, "aten_ops": {"aten.add.Tensor": 3}, "unsupported_ops": [],'
    ' "numerics": [{"name": "sample0.output_0", "max_abs": 0.5, "max_rel": 0.1, "rmse": 0.2,'
    ' "rtol": 1e-05, "atol": 1e-05, "ok": false, "note": null, "mismatches": 4}],'
    ' "ort_session_s": 0.01, "ort_latency_ms": null, "eager_latency_ms": null,'
    ' "speedup": null, "first_divergence": {"node": "node_Add_0", "op_type": "Add",'
    ' "max_abs": 0.5, "compared": 2, "sample": 1}, "attempt": 2,'
    ' "worker": {"node": "n1", "pid": 7, "cold_start": {"exporter": "dynamo", "seconds": 3.5}},'
    ' "duration_s": 4.0, "artifacts": {"error": "artifacts/x/error.txt"}, "reason": null,'
    ' "samples": {"total": 3, "run": 2, "exported": 2, "matched": 1, "wrong": 1, "failed": 0,'
    ' "skipped": 1, "indices": [0, 1, 2], "failures": [{"index": 1,'
    ' "status": "numerics_mismatch", "stage": "numerics", "error_signature": null}],'
    ' "skips": [{"index": 2, "reason": "random"}]}, "metadata": {"opinfo": "add"},'
    ' "graph_fingerprint": null, "ort_runtime": null,'
    ' "mismatch_stage": {"stage": "translation", "checks": [{"stage": "capture", "ok": true}]},'
    ' "minimal_repro": null}'
)


def test_a_schema_3_line_reads_into_the_typed_record() -> None:
    r = Record.from_json(SCHEMA_3_LINE)
    assert (r.cell.model, r.cell.patch, r.status, r.stage) == (
        "opinfo.add.float32",
        "none",
        "numerics_mismatch",
        "numerics",
    )
    assert (r.export.seconds, r.export.phases, r.export.onnx_ops) == (
        0.5,
        {"capture": 0.2, "translate": 0.3},
        {"Add": 3},
    )
    assert r.numerics.checks is not None and r.numerics.checks[0].mismatches == 4
    found = r.numerics.first_divergence
    assert found is not None and (found.node, found.sample, found.compared) == ("node_Add_0", 1, 2)
    assert (
        r.numerics.mismatch_stage is not None and r.numerics.mismatch_stage.stage == "translation"
    )
    assert r.worker is not None and (r.worker.node, r.worker.pid) == ("n1", 7)
    assert r.worker.cold_start is not None and r.worker.cold_start.seconds == 3.5
    s = r.samples
    assert s is not None and (s.total, s.matched, s.indices) == (3, 1, (0, 1, 2))
    assert s.failures is not None and s.failures[0].status == "numerics_mismatch"
    assert s.skips is not None and s.skips[0].reason == "random"
    assert (r.attempt, r.duration_s, r.speedup, r.ort.session_s) == (2, 4.0, None, 0.01)
    assert r.to_dict()["schema"] == SCHEMA


def test_a_key_a_newer_writer_added_to_worker_is_kept_not_refused() -> None:
    d = json.loads(_ok_record().to_json())
    d["worker"] = {"node": "n1", "gpu_uuid": "GPU-1", "cold_start": {"seconds": 1.0, "jit": 2}}
    r = Record.from_dict(d)
    assert r.worker is not None and r.worker.node == "n1"
    assert r.worker.extra == {"gpu_uuid": "GPU-1"}
    assert r.to_dict()["worker"] == d["worker"]  # written back as it came


def test_a_string_where_a_worker_number_belongs_is_malformed_naming_the_field() -> None:
    d = json.loads(_ok_record().to_json())
    d["worker"] = {"pid": "seven"}
    with pytest.raises(Malformed, match=r"'worker\.pid'"):
        Record.from_dict(d)
    d["worker"] = {"cold_start": {"seconds": "fast"}}
    with pytest.raises(Malformed, match=r"'worker\.cold_start\.seconds'"):
        Record.from_dict(d)
    d["worker"] = {"cold_start": {"cpu_seconds": [1.0]}}
    with pytest.raises(Malformed, match=r"'worker\.cold_start\.cpu_seconds'"):
        Record.from_dict(d)


def test_a_record_with_every_group_filled_round_trips_as_the_same_flat_line() -> None:
    decode = ShapeLatency.of({"batch": 1}, [1.0, 2.0, 3.0], [3.0, 4.0, 5.0])
    d = json.loads(_ok_record().to_json())
    d.update(
        export_peak_cuda_mb=5.0,
        onnx_bytes=100,
        onnx_nodes=2,
        onnx_ops={"Add": 2},
        aten_ops={"aten.add.Tensor": 2},
        unsupported_ops=["aten.cummax.default"],
        graph_fingerprint="f" * 64,
        ort_session_s=0.02,
        ort_runtime={"onnxruntime": "1.2", "providers": ["CPUExecutionProvider"]},
        first_divergence={"node": "n", "op_type": "Add", "max_abs": 0.5, "compared": 3},
        mismatch_stage={"stage": "optimization", "optimizer_step": {"pass": "p", "rule": "r"}},
        worker={"node": "n1", "pid": 7, "started_at": 1.7e9, "cold_start": {"seconds": 2.0}},
        samples={"total": 2, "run": 2, "indices": [0, 1], "skips": [], "failures": []},
        minimal_repro={"kind": "numerics", "reproduces": True, "imports": ["torch"]},
        metadata={"dtype": "float32"},
        shape_latency={"decode_step": decode.to_dict()},
        duration_s=3.0,
        attempt=2,
        reason="retried",
        artifacts={"graph": "../graphs/ff/model.onnx"},
        patch="sliding-window",
    )
    r = Record.from_dict(d)
    assert r.export.graph_fingerprint == "f" * 64 and r.ort.runtime is not None
    assert r.to_dict() == d
    assert json.loads(r.to_json()) == d


def test_a_record_written_before_dtypes_is_a_float32_cell() -> None:
    d = json.loads(_ok_record().to_json())
    d["schema"] = 4
    del d["dtype"], d["precision_loss"]
    again = Record.from_dict(d)
    assert again.dtype is Dtype.FLOAT32 and again.numerics.precision_loss is None
    assert again.cell.key == CELL.key and again.cell.cell_id == CELL.cell_id


def test_a_reduced_precision_cell_and_its_precision_loss_round_trip() -> None:
    cell = Cell("mlp", "dynamo", 18, dtype=Dtype.BFLOAT16)
    lost = OutputCheck("y", 1.3, 0.9, 0.2, 1e-3, 1e-5, False, None, 3, 0.03)
    kept = OutputCheck("y", 8e-4, 1e-3, 1e-4, 1e-3, 1e-5, True, None, 0, 0.0)
    loss = PrecisionLoss(eager=[lost], ort=[kept])
    record = Record.finished(cell, "r", measurements(precision_loss=loss))
    again = Record.from_json(record.to_json())
    assert again == record and again.numerics.precision_loss == loss
    assert loss.worse() == "eager" and PrecisionLoss([kept], [lost]).worse() == "ort"
    assert cell.cell_id.endswith("--base--bfloat16") and cell.key != Cell("mlp", "dynamo", 18).key
    with pytest.raises(SchemaError, match="dtype"):
        Record.from_dict({**record.to_dict(), "dtype": "float8"})
    bad = json.loads(record.to_json())
    bad["precision_loss"]["eager"][0]["mismatch_fraction"] = 1.5
    with pytest.raises(SchemaError, match="mismatch_fraction"):
        Record.from_dict(bad)
