"""The opinfo family end to end (real CLI, real Ray, real exports): two runs of a few OpInfos,
one with a wrong translation injected for aten::neg; `harness compare` names that op, at
that dtype, exporter and opset, and nothing else; so does `--variants` on one run holding
both; `harness coverage` shows the matrix with the dtype and the samples."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from harness.store import rundir
from tests.conftest import FIXTURES, run_cli

ZOO = FIXTURES / "opinfo_inject"


def _run(out: Path, **env: str) -> Path:
    result = run_cli(
        "run",
        "--zoo",
        str(ZOO),
        "--exporters",
        "dynamo,torchscript",
        "--opsets",
        "18",
        "--out",
        str(out),
        "--no-report",
        "--timeout",
        "300",
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("opinfo")
    return {"a": _run(root / "a"), "b": _run(root / "b", HARNESS_INJECT_WRONG_OP="neg")}


def _lost(findings: list[dict]) -> list[tuple]:
    return [
        (f["model"], f["exporter"], f["opset"], f["severity"])
        for f in findings
        if f["kind"] == "op_coverage_lost"
    ]


def test_every_cell_ends_with_one_record_that_names_its_opinfo(runs: dict[str, Path]) -> None:
    records = rundir.read_records(runs["a"])
    assert len(records) == len({r.cell.key for r in records}) == 8
    for r in records:
        assert r.metadata and r.metadata["opinfo"] in ("abs", "neg", "sigmoid", "add")
        assert r.samples and (r.samples.run or 0) >= 1
        assert r.status == "ok", (r.model, r.exporter, r.error_message)


def test_compare_names_exactly_the_op_that_lost_coverage(runs: dict[str, Path]) -> None:
    result = run_cli("compare", str(runs["a"]), str(runs["b"]), "--no-expected", "--format", "json")
    assert result.returncode == 1, result.stderr[-2000:]
    findings = json.loads(result.stdout)["findings"]
    assert _lost(findings) == [("fixture.opinfo.neg.float32", "dynamo", 18, "blocking")]
    lost = next(f for f in findings if f["kind"] == "op_coverage_lost")
    assert lost["message"].startswith(
        "neg no longer covered with dynamo at opset 18 (dynamo@18 float32)"
    )
    flips = [f for f in findings if f["kind"] == "sample_numerics_flipped"]
    assert flips and {f["model"] for f in flips} == {"fixture.opinfo.neg.float32"}
    assert all("values beyond tolerance" in f["message"] for f in flips)
    blocking = {(f["model"], f["exporter"]) for f in findings if f["severity"] == "blocking"}
    assert blocking == {("fixture.opinfo.neg.float32", "dynamo")}


def test_variants_of_one_run_name_the_same_op(runs: dict[str, Path], tmp_path: Path) -> None:
    both = tmp_path / "both"
    both.mkdir()
    (both / rundir.MANIFEST).write_text((runs["a"] / rundir.MANIFEST).read_text())
    with rundir.RecordWriter(both) as writer:
        for r in rundir.read_records(runs["a"]):
            writer.write(r)
        for r in rundir.read_records(runs["b"]):
            writer.write(r.with_cell(variant="inj"))
    result = run_cli(
        "compare", str(both), "--variants", "base,inj", "--no-expected", "--format", "json"
    )
    assert result.returncode == 1, result.stderr[-2000:]
    assert _lost(json.loads(result.stdout)["findings"]) == [
        ("fixture.opinfo.neg.float32", "dynamo", 18, "blocking")
    ]


def test_coverage_matrix_has_the_dtype_and_the_samples(runs: dict[str, Path]) -> None:
    result = run_cli("coverage", str(runs["b"]), "--format", "csv")
    assert result.returncode == 0, result.stderr
    rows = {(r["op"], r["exporter"]): r for r in csv.DictReader(io.StringIO(result.stdout))}
    neg = rows[("neg", "dynamo")]
    assert (neg["state"], neg["dtype"], neg["samples_matched"]) == ("wrong", "float32", "0")
    assert rows[("neg", "torchscript")]["state"] == "ok"
    md = run_cli("coverage", str(runs["b"])).stdout
    assert "4 OpInfos" in md and "dynamo@18 float32" in md
