"""A generated zoo's expected failures rewritten from a run (harness.zoo.expected), the
one mechanism the opinfo and transformers zoos share: records made by hand, a real file."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from harness.store.records import Cell, Measurements, Record
from harness.store.status import Status
from harness.zoo import expected_file
from harness.zoo.expect import Expect, judge
from harness.zoo.expected import ZooExpected

FAMILY = "gen"


def _failed(model: str, error: Exception, opset: int = 18) -> Record:
    cell = Cell(model, "dynamo", opset, family=FAMILY)
    return Record.finished(
        cell, "r", Measurements(), status=Status.EXPORT_FAILED, stage="translate", error=error
    )


def _zoo(tmp_path: Path, pin: bool) -> ZooExpected:
    return ZooExpected(tmp_path / "expected.csv", FAMILY, "# test zoo\n", pin_error_type=pin)


def test_a_rewrite_keeps_a_hand_edited_reason_while_the_error_type_stays(tmp_path: Path) -> None:
    zoo = _zoo(tmp_path, pin=True)
    assert zoo.update([_failed("m.a", KeyError("x")), _failed("m.b", KeyError("y"))]) == (0, 2)
    rows = expected_file.read(zoo.path).rows
    edited = [Expect(**{**_fields(e), "reason": "hand"}) if e.model == "m.a" else e for e in rows]
    expected_file.write(zoo.path, edited, header=zoo.header)
    # m.a fails the same way; m.b now fails with another error type
    assert zoo.update([_failed("m.a", KeyError("x")), _failed("m.b", ValueError("z"))]) == (2, 2)
    got = {e.model: e for e in expected_file.read(zoo.path).rows}
    assert got["m.a"].reason == "hand" and got["m.a"].match == "^KeyError:"
    assert got["m.b"].match == "^ValueError:" and got["m.b"].reason.startswith("ValueError")
    assert zoo.path.read_text().startswith("# test zoo\n")


def test_fixed_cells_lose_their_row_and_machine_failures_keep_theirs(tmp_path: Path) -> None:
    zoo = _zoo(tmp_path, pin=False)
    zoo.update([_failed("m.fixed", KeyError("x")), _failed("m.slow", KeyError("y"))])
    fixed = Record.finished(Cell("m.fixed", "dynamo", 18, family=FAMILY), "r", Measurements())
    slow = Record.without_run(
        Cell("m.slow", "dynamo", 18, family=FAMILY), "r", status=Status.TIMEOUT, reason="300 s"
    )
    other_zoo = _failed("x.other", KeyError("z")).with_cell(family="elsewhere")
    assert zoo.update([fixed, slow, other_zoo]) == (2, 1)
    (row,) = expected_file.read(zoo.path).rows
    assert (row.model, row.match) == ("m.slow", None)
    # the kept row still judges the cell's failure as expected
    assert judge(_failed("m.slow", KeyError("y")), (row,), date.today()).status is Status.XFAIL


def test_one_row_where_every_opset_failed_alike_else_one_per_opset_run(tmp_path: Path) -> None:
    zoo = _zoo(tmp_path, pin=True)
    ok_17 = Record.finished(Cell("m.b", "dynamo", 17, family=FAMILY), "r", Measurements())
    zoo.update(
        [
            _failed("m.a", KeyError("x"), 17),
            _failed("m.a", KeyError("x"), 18),
            ok_17,
            _failed("m.b", KeyError("x"), 18),
        ]
    )
    got = sorted((e.model, e.opset) for e in expected_file.read(zoo.path).rows)
    assert got == [("m.a", "*"), ("m.b", "18")]


def _fields(e: Expect) -> dict[str, object]:
    return {f: getattr(e, f) for f in e.__dataclass_fields__ if f != "source"}


def test_rows_name_the_patch_where_the_run_has_patches(tmp_path: Path) -> None:
    """A plain row must not judge the patched cell of the same model (that one passes or
    fails on its own): rows of a run with patches pin theirs; a run without patches keeps
    the file's columns as they were."""
    zoo = _zoo(tmp_path, pin=True)
    plain = _failed("m.a", KeyError("x"))
    patched = Record.finished(
        Cell("m.a", "dynamo", 18, family=FAMILY, patch="p"), "r", Measurements()
    )
    zoo.update([plain, patched])
    (row,) = expected_file.read(zoo.path).rows
    assert (row.model, row.patch) == ("m.a", "none")
    assert zoo.path.read_text().splitlines()[1].endswith(",expires,patch")
    assert judge(patched, (row,), date.today()).status is Status.OK  # not xpass
    assert judge(plain, (row,), date.today()).status is Status.XFAIL

    alone = _zoo(tmp_path / "plain", pin=True)
    alone.update([plain])
    (row,) = expected_file.read(alone.path).rows
    assert row.patch == "*" and alone.path.read_text().splitlines()[1].endswith(",expires")


def test_rows_of_a_reduced_precision_run_name_its_dtype_and_judge_only_its_cells(
    tmp_path: Path,
) -> None:
    """A float16 run's failures get float16 rows: the float32 cell of the same model fails
    or passes on its own, and a float32 row does not explain the float16 cell."""

    from harness.store.records import Dtype

    zoo = _zoo(tmp_path, pin=True)
    full = _failed("m.a", KeyError("x"))
    half = full.with_changes(cell=full.cell.replace(dtype=Dtype.FLOAT16))
    zoo.update([half])
    (row,) = expected_file.read(zoo.path).rows
    assert (row.model, row.dtype, row.ort_opt) == ("m.a", "float16", "default")
    assert zoo.path.read_text().splitlines()[1].endswith(",expires,patch,dtype")
    assert judge(half, (row,), date.today()).status is Status.XFAIL
    assert judge(full, (row,), date.today()).status is Status.EXPORT_FAILED
    zoo.update([full])  # the float32 run adds its own row, the float16 one stays
    rows = expected_file.read(zoo.path).rows
    assert sorted(r.dtype for r in rows) == ["float16", "float32"]
    float32_row = next(r for r in rows if r.dtype == "float32")
    assert judge(half, (float32_row,), date.today()).status is Status.EXPORT_FAILED
