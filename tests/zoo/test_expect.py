"""Expectations: one grammar for zoo entries and expected/status.csv, judged by the failure
they name (status, stage, error), not only by the cell."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from harness.store.records import Cell, Measurements, Record
from harness.store.status import Status
from harness.zoo import expected_file
from harness.zoo.expect import Expect, judge, lookup

TODAY = date(2026, 11, 23)


def _failed(cell: Cell, status: str, stage: str, message: str = "boom") -> Record:
    return Record.finished(
        cell, "r", Measurements(), status=status, stage=stage, error=RuntimeError(message)
    )


def test_globs_select_by_field() -> None:
    e = Expect("dynamo", "17", "checker_failed", "check", model="m", shape="dynamic")
    assert e.selects(Cell("m", "dynamo", 17, dynamic=True))
    assert not e.selects(Cell("m", "dynamo", 17))
    assert not e.selects(Cell("m", "dynamo", 18, dynamic=True))
    assert not e.selects(Cell("other", "dynamo", 17, dynamic=True))
    assert Expect("torchscript*").selects(Cell("m", "torchscript-script", 20, "cuda"))


def test_the_legacy_tuple_keeps_its_grammar_and_means_any_failure() -> None:
    e = Expect.legacy("dynamo/17/*/dynamic", "guard")
    assert (e.exporter, e.opset, e.device, e.shape, e.status) == (
        "dynamo",
        "17",
        "*",
        "dynamic",
        None,
    )
    cell = Cell("m", "dynamo", 17, dynamic=True)
    assert e.explains(_failed(cell, "ort_run_failed", "ort_run"))
    assert e.describe() == "any failure"


def test_explains_needs_the_status_the_stage_and_the_error() -> None:
    cell = Cell("m", "dynamo", 18)
    e = Expect("dynamo", status="export_failed", stage="translate", match=r"No ONNX function")
    assert e.explains(_failed(cell, "export_failed", "translate", "No ONNX function for cummax"))
    assert not e.explains(_failed(cell, "export_failed", "capture", "No ONNX function"))
    assert not e.explains(_failed(cell, "export_failed", "translate", "Cannot view a tensor"))
    assert not e.explains(_failed(cell, "numerics_mismatch", "numerics", "No ONNX function"))


def test_judge_xfail_xpass_and_a_new_failure_that_hides_behind_nothing() -> None:
    expects = (Expect("torchscript-script", status="export_failed", stage="capture", reason="R"),)
    cell = Cell("m", "torchscript-script", 18)
    xfail = judge(_failed(cell, "export_failed", "capture"), expects, TODAY)
    assert (xfail.status, xfail.reason) == (Status.XFAIL, "R")
    passed = judge(Record.finished(cell, "r", Measurements()), expects, TODAY)
    assert passed.status is Status.XPASS
    assert judge(passed, expects, TODAY) == passed  # judging twice changes nothing
    timeout = Record.without_run(cell, "r", status="timeout", reason="no result after 600 s")
    judged = judge(timeout, expects, TODAY)
    assert judged.status is Status.TIMEOUT
    assert judged.reason == "expected export_failed at capture (R); it failed differently"
    other_cell = judge(_failed(Cell("m", "dynamo", 18), "export_failed", "capture"), expects, TODAY)
    assert other_cell.status is Status.EXPORT_FAILED and other_cell.reason is None


def test_exact_wins_over_glob_and_expired_ones_do_not_count() -> None:
    glob = Expect("*", status="export_failed", reason="glob")
    exact = Expect("dynamo", "18", "checker_failed", model="m", device="cpu", reason="exact")
    expired = Expect("dynamo", "18", "ok", model="m", device="cpu", expires=date(2026, 1, 1))
    cell = Cell("m", "dynamo", 18)
    assert lookup((glob, exact), cell, TODAY) is exact
    assert lookup((expired, glob), cell, TODAY) is glob


def test_a_bad_status_stage_or_pattern_is_refused_where_it_is_written() -> None:
    with pytest.raises(ValueError, match="unknown status 'exported_fail'"):
        Expect("dynamo", status="exported_fail")
    with pytest.raises(ValueError):
        Expect("dynamo", stage="translation")
    with pytest.raises(Exception, match="unterminated|missing"):
        Expect("dynamo", match="(unclosed")


def test_expected_file_round_trip_and_an_old_header_still_reads(tmp_path: Path) -> None:
    rows = (
        Expect(
            "dynamo", "17", "checker_failed", "check", "num_outputs", "Split attr", model="detr"
        ),
        Expect("*", "*", "xfail", reason="known", model="seg_*", shape="dynamic"),
    )
    path = tmp_path / "status.csv"
    expected_file.write(path, rows)
    back = expected_file.read(path)
    assert back.rows == rows
    assert back.rows[0].source == f"{path}:{len(expected_file.HEADER.splitlines()) + 2}"
    old = tmp_path / "old.csv"
    old.write_text(
        "# comment\nmodel,exporter,opset,device,expected_status,reason,expires\n"
        "m,dynamo,18,cpu,export_failed,why,2027-01-01\n"
    )
    (row,) = expected_file.read(old).rows
    assert (row.status, row.stage, row.shape, row.expires) == (
        Status.EXPORT_FAILED,
        None,
        "*",
        date(2027, 1, 1),
    )


def test_a_bad_row_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "status.csv"
    path.write_text("model,exporter,opset,device,expected_status\nm,dynamo,18,cpu,nope\n")
    with pytest.raises(expected_file.ExpectedFileError, match=rf"{path}:2: unknown status 'nope'"):
        expected_file.read(path)


def test_a_row_is_about_float32_cells_unless_it_names_a_dtype_or_optimisation(
    tmp_path: Path,
) -> None:
    """A float32 failure must not make a float16 cell's failure look expected: a row without
    the dtype and ort_opt columns (every file before them) selects float32 cells under a
    default session; one that names them, or `*`, selects those."""
    from dataclasses import replace as changed

    from harness.store.records import Cell, Dtype, OrtOpt

    plain = Cell("m", "dynamo", 18)
    half = plain.replace(dtype=Dtype.FLOAT16)
    fused = plain.replace(ort_opt=OrtOpt.FUSIONS)
    row = Expect("dynamo", "18", "numerics_mismatch", model="m")
    assert row.selects(plain) and not row.selects(half) and not row.selects(fused)
    assert changed(row, dtype="float16").selects(half)
    assert changed(row, dtype="*", ort_opt="*").selects(half) and changed(row, ort_opt="*").selects(
        fused
    )
    path = tmp_path / "status.csv"
    expected_file.write(path, (row,))
    columns = next(ln for ln in path.read_text().splitlines() if ln.startswith("model,"))
    assert columns.endswith(",reason,expires")  # a file of float32 rows keeps its columns
    rows = (row, changed(row, dtype="bfloat16"), changed(row, ort_opt="fusions"))
    expected_file.write(path, rows)
    header = next(ln for ln in path.read_text().splitlines() if ln.startswith("model,"))
    assert header.endswith(",patch,dtype,ort_opt")
    assert expected_file.read(path).rows == rows
