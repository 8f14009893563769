"""The opinfo family on records and files, no exports: zoo names and entries from the
committed inventory, selection, the coverage matrix per (OpInfo, dtype, exporter, opset)
with samples, its findings, per-sample findings, expectations as data, --variants."""

from __future__ import annotations

import csv
import io
import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from harness.compare import BLOCKING, IMPROVEMENT, WARNING, compare_runs
from harness.coverage import matrix as coverage
from harness.coverage import render
from harness.errors import UsageError
from harness.plan.build import RunOptions, make_plan
from harness.store.records import Cell, Measurements, Record
from harness.store.runs import Run, variant_run
from harness.zoo import ModelSpec, expect, expected_file
from harness.zoo.discovery import discover
from harness.zoo.expect import Expect
from harness.zoo.expected import updated_rows
from harness.zoo.generated.opinfo_specs import (
    BUILTIN_OPINFO_EXPECTED,
    BUILTIN_OPINFO_INVENTORY,
    EXPECTED,
    model_base,
    read_inventory,
    specs,
)
from tests.conftest import run_cli
from tests.fixtures_compare import changed, typed_manifest

# -- names and entries --------------------------------------------------------------------------


def test_zoo_names_encode_case_and_variants_and_stay_unique() -> None:
    assert model_base("nn.functional.conv2d", "") == "opinfo.nn.functional.conv2d"
    assert model_base("mT", "") == "opinfo.m_t" != model_base("t", "")
    assert model_base("T", "") == "opinfo._t"
    assert (
        model_base("nn.functional.interpolate", "nearest-exact")
        == "opinfo.nn.functional.interpolate-nearest-exact"
    )
    inventory = read_inventory(BUILTIN_OPINFO_INVENTORY)
    bases = [e["model"] for e in inventory["opinfos"]]
    assert len(bases) == len(set(bases)) == len(inventory["opinfos"])


def test_every_opinfo_at_the_suites_dtypes_is_an_entry_with_its_real_names() -> None:
    inventory = read_inventory(BUILTIN_OPINFO_INVENTORY)
    assert inventory["dtypes"] == ["float32", "float16", "int64", "bool"]
    entries = specs(BUILTIN_OPINFO_INVENTORY, BUILTIN_OPINFO_EXPECTED)
    want = sum(len(e["samples"]) + len(e["problems"]) for e in inventory["opinfos"])
    assert len(entries) == want > 1500
    by_name = {s.name: s for s in entries}
    t = by_name["opinfo._t.float32"]
    assert (t.metadata["opinfo"], t.metadata["dtype"], t.family) == ("T", "float32", "opinfo")
    conv = by_name["opinfo.nn.functional.conv2d.float32"]
    assert conv.metadata["aten_name"] == "conv2d" and conv.metadata["samples"] >= 10
    assert conv.samples is not None and {"opinfo", "float32"} <= set(conv.tags)
    for s in entries:
        assert s.description and s.expect == tuple(e for e in s.expect if e.reason)
        for e in s.expect:
            assert e.status is not None and e.stage is not None, (s.name, e)


def test_float32_covers_the_opinfos_that_support_it() -> None:
    inventory = read_inventory(BUILTIN_OPINFO_INVENTORY)
    float32 = [e for e in inventory["opinfos"] if "float32" in e["samples"]]
    assert len(float32) >= 650  # 677 in torch 2.13


@pytest.mark.slow
def test_list_json_names_each_models_opinfo_and_dtype() -> None:
    result = run_cli("list", "--suite", "opinfo", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    models = json.loads(result.stdout)["models"]
    assert len(models) > 1500
    assert all(m["family"] == "opinfo" and m["opinfo"] and m["dtype"] for m in models)
    conv = next(m for m in models if m["name"] == "opinfo.nn.functional.conv2d.float16")
    assert (conv["opinfo"], conv["dtype"], conv["sampled"]) == (
        "nn.functional.conv2d",
        "float16",
        True,
    )


@pytest.mark.slow
def test_models_select_by_opinfo_and_dtype_and_an_unknown_opinfo_is_named() -> None:
    zoo = discover()
    chosen = {s.name for s in zoo.select(["opinfo:nn.functional.conv2d"])}
    assert chosen == {
        "opinfo.nn.functional.conv2d.float32",
        "opinfo.nn.functional.conv2d.float16",
        "opinfo.nn.functional.conv2d.int64",
    }
    plan = make_plan(
        RunOptions(suite="opinfo", models=("dtype:float32",), exporters=("dynamo",)), run_id="t"
    )
    assert len(plan.matrix.cells) >= 650
    assert all(c.model.endswith(".float32") and c.opset == 18 for c in plan.matrix.cells)
    with pytest.raises(UsageError, match=r"opinfo:nn\.functional\.nosuch"):
        make_plan(RunOptions(suite="opinfo", models=("opinfo:nn.functional.nosuch",)), run_id="t")
    result = run_cli("run", "--suite", "opinfo", "--models", "opinfo:nosuch_op", "--out", "/tmp/x")
    assert result.returncode == 2 and "nosuch_op" in result.stderr


def test_expected_rows_make_xfail_and_xpass() -> None:
    spec = next(s for s in specs(BUILTIN_OPINFO_INVENTORY) if s.name == "opinfo.fft.fft.float32")
    row = Expect("torchscript", status="export_failed", stage="translate", reason="no fft")
    judged = ModelSpec(**{**_fields(spec), "expect": (row,)})
    cell = Cell(spec.name, "torchscript", 18, family="opinfo")
    failing = Record.finished(
        cell, "r", Measurements(), status="export_failed", stage="translate", error=ValueError("x")
    )
    assert judged.judge(failing).status == "xfail"
    assert judged.judge(Record.finished(cell, "r", Measurements())).status == "xpass"


def _fields(spec: ModelSpec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in spec.__dataclass_fields__ if f != "source"}


# -- coverage on synthetic records ----------------------------------------------------------------


def orec(
    opinfo: str,
    dtype: str,
    exporter: str = "dynamo",
    *,
    status: str = "ok",
    stage: str | None = None,
    error: str | None = None,
    samples: tuple[int, int] = (4, 4),
    failures: list[dict[str, Any]] | None = None,
    variant: str = "base",
    aten: str | None = None,
) -> Record:
    matched, run = samples
    summary = {
        "total": run,
        "run": run,
        "exported": run,
        "matched": matched,
        "wrong": run - matched if status == "numerics_mismatch" else 0,
        "failed": run - matched if status != "numerics_mismatch" else 0,
        "skipped": 0,
        "indices": list(range(run)),
        "failures": failures or [],
        "skips": [],
    }
    cell = Cell(f"{model_base(opinfo, '')}.{dtype}", exporter, 18, variant=variant, family="opinfo")
    exc = RuntimeError(error) if error else None
    r = Record.finished(cell, "r", Measurements(), status=status, stage=stage, error=exc)
    meta = {"opinfo": opinfo, "variant": "", "dtype": dtype, "aten_name": aten or opinfo}
    return changed(r, samples=summary, metadata=meta)


def opinfo_run() -> list[Record]:
    return [
        orec("T", "float32"),
        orec(
            "t", "float32", status="export_failed", stage="translate", error="no t", samples=(0, 4)
        ),
        orec("add", "float32", aten="add"),
        orec(
            "add",
            "int64",
            status="numerics_mismatch",
            stage="numerics",
            error="off",
            samples=(3, 4),
        ),
        orec("add", "float32", "torchscript"),
    ]


USAGE = {
    "aten.add.Tensor": ("m1", "m2"),
    "aten.add.tensor": ("m1", "m2"),
    "aten.t.default": ("m3",),
}


def test_rows_are_opinfos_columns_carry_the_dtype_and_states_their_samples() -> None:
    cov = coverage.build_coverage(opinfo_run(), usage=USAGE)
    rows = {r.op: r for r in cov.rows}
    assert set(rows) == {"T", "t", "add"}  # 'T' and 't' are two OpInfos
    assert all(r.kind == "opinfo" for r in cov.rows)
    d32, d64 = (
        coverage.Column("dynamo", 18, dtype="float32"),
        coverage.Column("dynamo", 18, dtype="int64"),
    )
    assert d32.label == "dynamo@18 float32"
    add = rows["add"]
    assert add.states[d64].state == coverage.WRONG and add.states[d64].samples == (3, 4)
    assert add.states[d32].state == coverage.OK and add.usage == ("m1", "m2")
    assert rows["t"].states[d32].state == coverage.FAILS and rows["t"].usage == ("m3",)
    (s32,) = [s for s in cov.summaries() if s.column == d32]
    assert (s32.ops, s32.counts[coverage.OK], s32.samples_matched, s32.samples_run) == (3, 2, 8, 12)
    assert s32.weighted_share == pytest.approx(2 / 3)  # add (2 models) of add + t (3)
    dynamo_all, torchscript_all = cov.totals()
    assert dynamo_all.column.label == "dynamo@18 (all dtypes)"
    assert (dynamo_all.ops, dynamo_all.counts[coverage.OK], dynamo_all.samples_run) == (4, 2, 16)
    assert (torchscript_all.ops, torchscript_all.counts[coverage.OK]) == (1, 1)
    text = render.to_markdown(cov)
    assert "| dynamo@18 (all dtypes) | 4 | 2 | 1 | 1 |" in text
    assert "3 OpInfos" in text and "| `add` | 2 |" in text and "wrong 3/4" in text
    assert "8 of 12 (67%)" in text
    rows_csv = list(csv.DictReader(io.StringIO(render.to_csv(cov))))
    wrong = next(r for r in rows_csv if r["op"] == "add" and r["dtype"] == "int64")
    assert (wrong["state"], wrong["samples_matched"], wrong["samples_run"]) == ("wrong", "3", "4")
    assert render.to_json(cov)["summary"][0]["dtype"]


def test_comparison_names_exactly_the_op_dtype_exporter_and_opset_that_changed() -> None:
    base = opinfo_run()
    flip = [
        {
            "index": 2,
            "status": "numerics_mismatch",
            "stage": "numerics",
            "error_signature": "NumericsMismatch: N of N outputs differ: values beyond tolerance",
            "inputs": "input float32[3]",
        }
    ]
    cand = [
        orec(
            "T",
            "float32",
            status="numerics_mismatch",
            stage="numerics",
            error="x",
            samples=(3, 4),
            failures=flip,
        ),
        *base[1:3],
        orec("add", "int64"),  # fixed
        base[4],
    ]
    result = compare_runs(
        Run(typed_manifest("a"), tuple(base)), Run(typed_manifest("b"), tuple(cand))
    )
    lost = [f for f in result.findings if f.kind == "op_coverage_lost"]
    assert [(f.severity, f.cell.model, f.cell.exporter, f.cell.opset) for f in lost] == [
        (BLOCKING, "opinfo._t.float32", "dynamo", 18)
    ]
    assert "T no longer covered with dynamo at opset 18 (dynamo@18 float32)" in lost[0].message
    gained = [f for f in result.findings if f.kind == "op_coverage_gained"]
    assert [(f.severity, f.cell.model) for f in gained] == [(IMPROVEMENT, "opinfo.add.int64")]
    (flipped,) = [f for f in result.findings if f.kind == "sample_numerics_flipped"]
    assert flipped.severity == WARNING and "sample 2 (input float32[3])" in flipped.message
    assert "values beyond tolerance" in flipped.message
    assert not [f for f in result.findings if f.kind == "numerics_flipped"]


def variant_records(*, lost_at: int, op: str) -> tuple[list[Record], list[Record]]:
    """An opinfo run's records as variant `base`, and again as `new` where the cell at
    `lost_at` (OpInfo `op` at float32) no longer exports."""
    base = opinfo_run()
    cand = [r.with_cell(variant="new") for r in base]
    cand[lost_at] = orec(
        op, "float32", variant="new", status="export_failed", stage="translate", error="e",
        samples=(0, 4),
    )  # fmt: skip
    return base, cand


def test_two_variants_of_one_run_compare_cell_by_cell() -> None:
    base, cand = variant_records(lost_at=0, op="T")
    run = Run(typed_manifest("both"), tuple(base + cand))
    old, new = variant_run(run, "base", label="new"), variant_run(run, "new", label="new")
    assert len(old.records) == len(new.records) == 5
    result = compare_runs(old, new)
    lost = [f for f in result.findings if f.kind == "op_coverage_lost"]
    assert [(f.cell.model, f.cell.variant) for f in lost] == [("opinfo._t.float32", "new")]


@pytest.mark.slow
def test_variants_flag_on_the_cli(tmp_path: Path) -> None:
    from harness.store import rundir

    base, cand = variant_records(lost_at=2, op="add")
    rundir.write_manifest(tmp_path, typed_manifest("both"))
    with rundir.RecordWriter(tmp_path) as writer:
        for r in base + cand:
            writer.write(r)
    result = run_cli(
        "compare", str(tmp_path), "--variants", "base,new", "--no-expected", "--format", "json"
    )
    assert result.returncode == 1, result.stderr[-2000:]
    findings = json.loads(result.stdout)["findings"]
    assert [(f["model"], f["variant"]) for f in findings if f["kind"] == "op_coverage_lost"] == [
        ("opinfo.add.float32", "new")
    ]
    bad = run_cli("compare", str(tmp_path), "--variants", "base,nope")
    assert bad.returncode == 2 and "nope" in bad.stderr


# -- expected failures as data -------------------------------------------------------------------


def test_expected_rows_from_a_run_keep_reasons_drop_fixed_and_keep_others(tmp_path: Path) -> None:
    old = (
        Expect(
            "dynamo",
            "*",
            "export_failed",
            "translate",
            reason="hand-written",
            model="opinfo.t.float32",
        ),
        Expect(
            "dynamo",
            "*",
            "export_failed",
            "translate",
            reason="fixed since",
            model="opinfo.add.float32",
        ),
        Expect(
            "dynamo",
            "*",
            "export_failed",
            "translate",
            reason="not run",
            model="opinfo.zzz.float32",
        ),
    )
    t = orec(
        "t", "float32", status="export_failed", stage="translate", error="no t", samples=(0, 4)
    )
    t = t.with_cell(model="opinfo.t.float32")
    new_fail = orec(
        "T", "float32", "torchscript", status="export_failed", stage="translate", error="E"
    )
    new_fail = changed(new_fail, unsupported_ops=["aten.numpy_T"])
    add = orec("add", "float32").with_changes(status="xpass")
    rows = updated_rows(old, [t, new_fail, add], EXPECTED)
    got = {(e.model, e.exporter, e.opset): e for e in rows}
    assert set(got) == {
        ("opinfo.t.float32", "dynamo", "18"),
        ("opinfo._t.float32", "torchscript", "18"),
        ("opinfo.zzz.float32", "dynamo", "*"),
    }
    assert got[("opinfo.t.float32", "dynamo", "18")].reason == "hand-written"
    assert (
        got[("opinfo._t.float32", "torchscript", "18")].reason
        == "no torchscript translation for aten.numpy_T"
    )
    path = tmp_path / "expected.csv"
    expected_file.write(path, rows)
    assert expected_file.read(path).rows == tuple(rows)
    xfail = expect.judge(t, tuple(e for e in rows if e.model == t.model), date.today())
    assert xfail.status == "xfail" and xfail.reason == "hand-written"


def test_the_older_coverage_update_expected_says_so_and_writes_the_zoo_file(tmp_path: Path) -> None:
    from harness.store import rundir

    run = tmp_path / "run"
    rundir.write_manifest(run, typed_manifest("r"))
    with rundir.RecordWriter(run) as writer:
        for r in opinfo_run():
            writer.write(r)
    path = tmp_path / "expected.csv"
    result = run_cli("coverage", str(run), "--update-expected", "--expected", str(path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "deprecated: use `harness zoo expected RUN_DIR`" in result.stderr
    rows = expected_file.read(path).rows
    assert {(e.model, e.exporter, e.opset, str(e.status), str(e.stage)) for e in rows} == {
        ("opinfo.t.float32", "dynamo", "18", "export_failed", "translate"),
        ("opinfo.add.int64", "dynamo", "18", "numerics_mismatch", "numerics"),
    }
    assert path.read_text().startswith("# Expected failures of the opinfo zoo")
