"""The coverage matrix, its renderings and its findings on synthetic records (no torch)."""

from __future__ import annotations

import csv
import io
import json

from harness.cli import main as cli_main
from harness.compare import BLOCKING, IMPROVEMENT, compare_runs
from harness.coverage import matrix as coverage
from harness.coverage import render
from harness.coverage.matrix import FAILS, OK, UNKNOWN, WRONG, Column, build_coverage
from harness.store.records import Cell, Record
from harness.store.runs import Run
from tests.fixtures_compare import changed, measurements, typed_manifest

D18, T18 = Column("dynamo", 18), Column("torchscript", 18)


def rec(
    model: str,
    exporter: str = "dynamo",
    opset: int = 18,
    *,
    family: str = "seed",
    status: str = "ok",
    stage: str | None = None,
    aten_ops: dict[str, int] | None = None,
    unsupported: list[str] | None = None,
    error: str | None = None,
) -> Record:
    m = measurements(aten_ops=aten_ops, unsupported_ops=unsupported)
    exc = RuntimeError(error) if error else None
    return Record.finished(
        Cell(model, exporter, opset, family=family), "r", m, status=status, stage=stage, error=exc
    )


def failed(model: str, exporter: str = "dynamo", **kw) -> Record:
    return rec(model, exporter, status="export_failed", stage="translate", error="no", **kw)


def states(cov: coverage.Coverage) -> dict[tuple[str, str], str]:
    return {(row.op, c.label): s.state for row in cov.rows for c, s in row.states.items()}


# -- from model cells ---------------------------------------------------------------------------


def model_run() -> list[Record]:
    return [
        rec("plain", aten_ops={"aten.conv2d.default": 1, "aten.relu.default": 1}),
        rec("plain", "torchscript", aten_ops={"aten._convolution": 1, "aten.relu": 1}),
        failed(
            "cm",
            aten_ops={"aten.cummax.default": 1, "aten.mul.Tensor": 1},
            unsupported=["aten.cummax.default"],
        ),
        failed(
            "cm",
            "torchscript",
            aten_ops={"aten.cummax": 1, "aten.mul": 1},
            unsupported=["aten.cummax"],
        ),
        rec("lc", aten_ops={"aten.logcumsumexp.default": 1, "aten.mul.Tensor": 1}),
        failed(
            "lc",
            "torchscript",
            aten_ops={"aten.logcumsumexp": 1, "aten.mul": 1},
            unsupported=["aten.logcumsumexp"],
        ),
    ]


def test_model_cells_ok_where_a_passing_cell_used_the_op_fails_where_unsupported():
    got = states(build_coverage(model_run()))
    assert got[("aten.cummax.default", "dynamo@18")] == FAILS
    assert (
        got[("aten.cummax.default", "torchscript@18")] == FAILS
    )  # 'aten.cummax' joins its overload
    assert got[("aten.logcumsumexp.default", "dynamo@18")] == OK
    assert got[("aten.logcumsumexp.default", "torchscript@18")] == FAILS
    assert got[("aten.mul.Tensor", "dynamo@18")] == OK  # failing in cm, exported in lc
    assert got[("aten.mul.Tensor", "torchscript@18")] == UNKNOWN  # only in failing cells
    assert (
        got[("aten._convolution", "torchscript@18")] == OK
    )  # TorchScript-only op: a row of its own
    assert ("aten._convolution", "dynamo@18") not in got


def test_usage_counts_the_models_of_the_run_and_summary_shares_by_hand():
    cov = build_coverage(model_run())
    usage = {row.op: row.usage for row in cov.rows}
    assert usage["aten.mul.Tensor"] == ("cm", "lc") and usage["aten.relu.default"] == ("plain",)
    (dyn,) = [s for s in cov.summaries() if s.column == D18]
    # dynamo: conv2d, relu, logcumsumexp, mul ok (usage 1, 1, 1, 2); cummax fails (usage 1)
    assert dyn.ops == 5 and dyn.counts[OK] == 4 and dyn.counts[FAILS] == 1
    assert dyn.covered_share == 4 / 5 and dyn.weighted_share == 5 / 6


def test_the_worse_state_wins_within_a_column():
    records = [
        rec("a", aten_ops={"aten.pad.default": 1}),
        failed("b", aten_ops={"aten.pad.default": 1}, unsupported=["aten.pad.default"]),
    ]
    row = build_coverage(records).rows[0]
    assert row.states[D18].state == FAILS and row.states[D18].models == ("b",)


def test_a_torchscript_packet_counts_for_each_overload_seen():
    records = [
        rec("a", aten_ops={"aten.add.Tensor": 1, "aten.add.Scalar": 1}),
        rec("a", "torchscript", aten_ops={"aten.add": 2}),
    ]
    got = states(build_coverage(records))
    assert got[("aten.add.Tensor", "torchscript@18")] == OK
    assert got[("aten.add.Scalar", "torchscript@18")] == OK


# -- from op cells ----------------------------------------------------------------------------------


def op_run() -> list[Record]:
    ops = "ops"
    return [
        rec("aten.add.tensor", family=ops),
        rec("aten.add.tensor", "torchscript", family=ops),
        rec(
            "aten.cummax.default",
            family=ops,
            status="export_failed",
            stage="translate",
            error="No ONNX function found for aten.cummax.default",
        ),
        rec(
            "aten.unfold.default",
            "torchscript",
            family=ops,
            status="numerics_mismatch",
            stage="numerics",
            error="1 of 1 outputs differ",
        ),
        rec("aten.t.default", family=ops, status="harness_error", stage="build", error="bad"),
        changed(
            rec(
                "aten.relu.default", family=ops, status="ort_run_failed", stage="latency", error="x"
            ),
            numerics=[],
        ),
    ]


USAGE = {"aten.add.Tensor": ("m1", "m2", "m3"), "aten.cummax.default": ("m1",)}


def test_op_cells_state_is_the_cells_status_and_names_come_from_the_inventory():
    cov = build_coverage(op_run(), usage=USAGE)
    got = states(cov)
    assert cov.source == "op cells"
    assert got[("aten.add.Tensor", "dynamo@18")] == OK  # real spelling from the inventory
    assert got[("aten.add.Tensor", "torchscript@18")] == OK
    assert got[("aten.cummax.default", "dynamo@18")] == FAILS
    assert got[("aten.unfold.default", "torchscript@18")] == WRONG
    assert got[("aten.t.default", "dynamo@18")] == UNKNOWN  # the harness could not judge
    row = next(r for r in cov.rows if r.op == "aten.cummax.default")
    assert row.usage == ("m1",)
    assert "No ONNX function found" in (row.states[D18].signature or "")


def test_op_cells_override_model_cells_for_their_op():
    records = [
        *op_run(),
        failed("m1", aten_ops={"aten.add.Tensor": 1}, unsupported=["aten.add.Tensor"]),
    ]
    cov = build_coverage(records, usage=USAGE)
    assert cov.source == "op cells and model cells"
    assert states(cov)[("aten.add.Tensor", "dynamo@18")] == OK


def test_weighted_share_uses_the_inventory_usage():
    cov = build_coverage(op_run()[:3], usage=USAGE)
    (dyn,) = [s for s in cov.summaries() if s.column == D18]
    assert dyn.covered_share == 1 / 2 and dyn.weighted_share == 3 / 4


# -- renderings ---------------------------------------------------------------------------------


def test_markdown_has_the_summary_the_matrix_and_why():
    text = render.to_markdown(build_coverage(model_run()))
    assert "| dynamo@18 | 5 | 4 | 0 | 1 | 0 | 80% | 83% |" in text
    assert "| `aten.cummax.default` | 1 | FAILS | FAILS |" in text
    assert "- `aten.logcumsumexp.default` fails with torchscript@18" in text


def test_problems_only_keeps_the_rows_with_a_problem():
    text = render.to_markdown(build_coverage(model_run()), problems_only=True)
    assert "`aten.cummax.default`" in text and "| `aten.relu.default`" not in text
    assert "3 ops export and match in every column" in text


def test_json_and_csv():
    cov = build_coverage(model_run())
    data = render.to_json(cov)
    assert data["columns"] == ["dynamo@18", "torchscript@18"]
    cm = next(o for o in data["ops"] if o["op"] == "aten.cummax.default")
    assert cm["models"] == ["cm"] and cm["status"]["dynamo@18"]["state"] == FAILS
    json.dumps(data)
    rows = list(csv.DictReader(io.StringIO(render.to_csv(cov))))
    assert tuple(rows[0]) == render.CSV_COLUMNS
    assert {"op": "aten.relu.default", "exporter": "torchscript", "state": OK}.items() <= next(
        r for r in rows if r["op"] == "aten.relu.default" and r["exporter"] == "torchscript"
    ).items()


def test_coverage_markdown_is_none_without_op_data():
    assert render.coverage_markdown([rec("a")]) is None
    assert "aten.cummax.default" in (render.coverage_markdown(model_run()) or "")


# -- findings ---------------------------------------------------------------------------------


def run(run_id: str, records: list[Record]) -> Run:
    return Run(typed_manifest(run_id), tuple(r.with_changes(run_id=run_id) for r in records))


def test_an_op_lost_is_blocking_and_names_op_exporter_opset_and_models():
    base = model_run()
    cand = [
        *base[:4],
        failed(
            "lc",
            aten_ops={"aten.logcumsumexp.default": 1, "aten.mul.Tensor": 1},
            unsupported=["aten.logcumsumexp.default"],
        ),
        base[5],
    ]
    lost = [
        f
        for f in compare_runs(run("A", base), run("B", cand)).findings
        if f.kind == "op_coverage_lost"
    ]
    assert len(lost) == 1 and lost[0].severity == BLOCKING
    f = lost[0]
    assert "aten.logcumsumexp.default" in f.message and "dynamo at opset 18" in f.message
    assert "used by lc" in f.message and (f.baseline, f.candidate) == (OK, FAILS)
    assert f.cell is not None and f.cell.model == "lc"


def test_an_op_only_in_cells_failing_otherwise_is_not_blamed():
    base = [rec("a", aten_ops={"aten.relu.default": 1})]
    cand = [failed("a", aten_ops={"aten.relu.default": 1})]
    found = compare_runs(run("A", base), run("B", cand)).findings
    assert "op_coverage_lost" not in {f.kind for f in found}


def test_a_newly_covered_op_is_an_improvement():
    base, cand = op_run(), [rec("aten.cummax.default", family="ops"), *op_run()[:2]]
    gained = [
        f
        for f in compare_runs(run("A", base), run("B", cand)).findings
        if f.kind == "op_coverage_gained"
    ]
    assert [(f.severity, f.candidate) for f in gained] == [(IMPROVEMENT, OK)]
    assert "aten.cummax.default now covered with dynamo at opset 18" in gained[0].message


# -- the command line -----------------------------------------------------------------------------


def test_cli_usage_errors_exit_2(tmp_path, capsys):
    assert cli_main(["coverage"]) == 2
    assert cli_main(["coverage", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    assert cli_main(["coverage", str(tmp_path), "--zoo", "x"]) == 2
    assert cli_main(["coverage", str(tmp_path), "--refresh-inventory"]) == 2
