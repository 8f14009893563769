"""Op coverage end to end: the real CLI exports the coverage fixture zoo with both exporters
(real Ray, real exports), `harness coverage` reads the matrix, and `harness compare` blocks
on an op that stopped exporting."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from harness.plan.build import RunOptions, make_plan
from harness.store import rundir as store
from tests.conftest import FIXTURES, run_cli
from tests.fixtures_compare import changed


@pytest.fixture(scope="module")
def coverage_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "coverage"
    result = run_cli(
        "run",
        "--zoo",
        str(FIXTURES / "coverage"),
        "--exporters",
        "dynamo,torchscript",
        "--opsets",
        "18",
        "--out",
        str(out),
        "--timeout",
        "300",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def matrix(run_dir: Path) -> dict[tuple[str, str], dict[str, str]]:
    result = run_cli("coverage", str(run_dir), "--format", "csv")
    assert result.returncode == 0, result.stderr
    rows = csv.DictReader(io.StringIO(result.stdout))
    return {(r["op"], f"{r['exporter']}@{r['opset']}"): r for r in rows}


def test_records_name_the_unsupported_ops(coverage_run: Path):
    by_cell = {(r.model, r.exporter): r for r in store.read_records(coverage_run)}
    assert by_cell[("cov_cummax", "dynamo")].export.unsupported_ops == ["aten.cummax.default"]
    assert by_cell[("cov_cummax", "torchscript")].export.unsupported_ops == ["aten.cummax"]
    assert by_cell[("cov_erfcx", "torchscript")].export.unsupported_ops == ["aten.special_erfcx"]
    assert by_cell[("cov_logcumsumexp", "torchscript")].export.unsupported_ops == [
        "aten.logcumsumexp"
    ]
    assert by_cell[("cov_erfcx", "dynamo")].status == "ok"
    assert "aten.special_erfcx.default" in (by_cell[("cov_erfcx", "dynamo")].export.aten_ops or {})


def test_cummax_fails_on_both_erfcx_and_logcumsumexp_only_export_with_dynamo(coverage_run: Path):
    m = matrix(coverage_run)
    state = {k: v["state"] for k, v in m.items()}
    assert state[("aten.cummax.default", "dynamo@18")] == "fails"
    assert state[("aten.cummax.default", "torchscript@18")] == "fails"
    for op in ("aten.special_erfcx.default", "aten.logcumsumexp.default"):
        assert (state[(op, "dynamo@18")], state[(op, "torchscript@18")]) == ("ok", "fails")
    assert (
        state[("aten.relu.default", "dynamo@18")]
        == state[("aten.relu.default", "torchscript@18")]
        == "ok"
    )
    assert (
        "no ONNX translation for aten.cummax.default"
        in m[("aten.cummax.default", "dynamo@18")]["signature"]
    )
    assert "aten::logcumsumexp" in m[("aten.logcumsumexp.default", "torchscript@18")]["signature"]
    assert m[("aten.cummax.default", "dynamo@18")]["models"] == "1"


def test_markdown_and_json_summaries(coverage_run: Path):
    md = run_cli("coverage", str(coverage_run))
    assert md.returncode == 0 and "| `aten.cummax.default` | 1 | FAILS | FAILS |" in md.stdout
    data = json.loads(run_cli("coverage", str(coverage_run), "--format", "json").stdout)
    summary = {s["exporter"]: s for s in data["summary"]}
    assert summary["torchscript"]["fails"] == 3 and summary["dynamo"]["fails"] == 1


def test_compare_blocks_on_a_lost_op(coverage_run: Path, tmp_path: Path):
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    shutil.copy(coverage_run / store.MANIFEST, candidate / store.MANIFEST)
    with store.RecordWriter(candidate) as writer:
        for r in store.read_records(coverage_run):
            if (r.model, r.exporter) == ("cov_logcumsumexp", "dynamo"):
                r = changed(
                    r,
                    status="export_failed",
                    stage="translate",
                    unsupported_ops=["aten.logcumsumexp.default"],
                    error_signature="DispatchError: No ONNX function found for aten.logcumsumexp",
                )
            writer.write(r)
    result = run_cli(
        "compare", str(coverage_run), str(candidate), "--no-expected", "--format", "json"
    )
    assert result.returncode == 1, result.stderr
    findings = json.loads(result.stdout)["findings"]
    (lost,) = [f for f in findings if f["kind"] == "op_coverage_lost"]
    assert lost["severity"] == "blocking" and (lost["exporter"], lost["opset"]) == ("dynamo", 18)
    assert "aten.logcumsumexp.default" in lost["message"] and "cov_logcumsumexp" in lost["message"]


def test_ops_suite_selects_the_one_op_models_by_glob():
    plan = make_plan(RunOptions(suite="ops", models=("aten.conv*",)), run_id="t")
    cells = plan.matrix.cells
    assert {c.model for c in cells} >= {"aten.conv2d.default"}
    assert all(c.model.startswith("aten.conv") and c.family == "ops" for c in cells)
    assert {(c.exporter, c.opset) for c in cells} == {
        (e, o) for e in ("dynamo", "torchscript") for o in (17, 18, 20)
    }
    assert not any(c.dynamic for c in cells)
