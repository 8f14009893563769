"""The report's sections for this stop's axes, from hand-made records: reduced precision,
ORT optimisations, and transformers' exporter beside the bare dynamo call."""

from __future__ import annotations

from harness.report.document import Section, Table
from harness.report.hf import hf_section
from harness.report.ort_opt import ort_opt_section
from harness.report.precision import precision_section
from harness.store.measures import OrtMeasures, OutputCheck, PrecisionLoss
from harness.store.records import Cell, Dtype, Latency, OrtOpt, Record
from harness.store.status import Stage, Status
from tests.fixtures_compare import measurements


def _record(model: str, exporter: str = "dynamo", status: str = "ok", **cell: object) -> Record:
    found = Record.finished(Cell(model, exporter, 18, **cell), "r", measurements())  # type: ignore[arg-type]
    return found.with_changes(status=Status(status))


def _rows(section: Section, index: int = 0) -> list[tuple[str, ...]]:
    tables = [b for b in section.blocks if isinstance(b, Table)]
    return [tuple(t.text for t in row) for row in tables[index].rows]


def _check(max_abs: float, ok: bool) -> OutputCheck:
    return OutputCheck("y", max_abs, None, None, 1e-3, 1e-5, ok, None, 0, 0.0)


def test_the_precision_section_counts_losses_and_missing_kernels_apart() -> None:
    lost = PrecisionLoss(eager=[_check(1.3, False)], ort=[_check(8e-4, True)])
    eager_lost = _record("a", dtype=Dtype.FLOAT16).with_changes(
        numerics=measurements(precision_loss=lost).numerics
    )
    missing = _record("b", status="runtime_missing", dtype=Dtype.BFLOAT16).with_changes(
        stage=Stage.ORT_SESSION, error_message="onnxruntime has no bfloat16 kernel for Gemm(13)"
    )
    plain = _record("c")
    assert precision_section([plain]) is None
    section = precision_section([plain, eager_lost, missing])
    assert section is not None
    counts = _rows(section)
    assert ("dynamo", "bfloat16", "1", "0", "0", "0", "0", "0", "1") in counts
    assert ("dynamo", "float16", "1", "0", "1", "1", "1", "0", "0") in counts
    cells = {row[0]: row for row in _rows(section, 1)}
    assert cells["a dynamo@18 cpu float16"][-1].startswith("eager (the model is not safe")
    assert cells["b dynamo@18 cpu bfloat16"][-1].endswith("kernel for Gemm(13)")


def test_the_ort_section_names_the_optimizer_and_compares_with_the_none_twin() -> None:
    def timed(level: OrtOpt, p50: list[float], **ort: object) -> Record:
        r = _record("m", ort_opt=level)
        return r.with_changes(ort=OrtMeasures(latency=Latency.from_samples(p50), **ort))  # type: ignore[arg-type]

    none = timed(OrtOpt.NONE, [2.0, 2.0, 2.0], fused_ops={})
    broken = timed(OrtOpt.ALL, [1.0, 1.0, 1.0], fused_ops={"QLinearConv": 1}, broken_by="X")
    assert ort_opt_section([none]) is not None
    assert ort_opt_section([_record("m")]) is None
    section = ort_opt_section([none, broken.with_changes(status=Status.NUMERICS_MISMATCH)])
    assert section is not None
    rows = {row[2]: row for row in _rows(section)}
    assert rows["all"][3:] == ("1", "0", "1", "QLinearConv 1", "2.00×")
    assert _rows(section, 1) == [("m dynamo@18 cpu [ort all]", "X", "—", "numerics_mismatch")]


def test_the_hf_section_pairs_each_cell_with_its_bare_dynamo_twin() -> None:
    records = [
        _record("a"),
        _record("a", "transformers"),
        _record("b", status="export_failed"),
        _record("b", "transformers"),
        _record("c", "transformers", status="skipped"),
        _record("c"),
    ]
    assert hf_section(records[:1]) is None
    section = hf_section(records)
    assert section is not None
    assert _rows(section) == [
        ("both", "1"),
        ("only transformers", "1"),
        ("only dynamo", "0"),
        ("neither", "0"),
    ]
    assert _rows(section, 1) == [("b @18 cpu", "export_failed", "ok")]
