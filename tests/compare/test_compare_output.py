"""The projections of a comparison: markdown, JSON, JUnit XML, pytest-benchmark JSON."""

from __future__ import annotations

import dataclasses
import json
import random
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from pytest_benchmark.stats import Stats

from harness.compare import compare_runs
from harness.compare.output.benchmark import benchmark_stats, to_pytest_benchmark
from harness.compare.output.json_report import to_json
from harness.compare.output.junit import to_junit
from harness.compare.output.markdown import to_markdown
from harness.store.runs import Run
from tests.fixtures_compare import check, record, samples, typed_manifest


def comparison():
    rng = random.Random(9)
    base = [
        record("fast", ort=samples(rng, 5.0, 0.02), numerics=[check(max_abs=1e-7)], export_s=2.0),
        record("gone", status="export_failed", stage="capture", error=RuntimeError("guard")),
        record("same", ort=samples(rng, 1.0, 0.02)),
        record("old"),
    ]
    cand = [
        record("fast", ort=samples(rng, 3.0, 0.02), numerics=[check(max_abs=5e-6)], export_s=2.0),
        record("gone", ort=samples(rng, 1.0, 0.02)),
        record("same", ort=samples(rng, 1.0, 0.02)),
        record("new", status="timeout", stage="latency"),
    ]
    a = Run(typed_manifest("A"), tuple(r.with_changes(run_id="A") for r in base), "A")
    b = Run(typed_manifest("B"), tuple(r.with_changes(run_id="B") for r in cand), "B")
    return compare_runs(a, b)


def test_markdown_folds_warnings_and_improvements():
    md = to_markdown(comparison())
    assert md.startswith("## ✅ harness compare: nothing blocking\n")
    assert "<details><summary>Warnings (2)</summary>" in md  # numerics grew, cell vanished
    assert "<details><summary>Improvements (2)</summary>" in md  # fixed, faster
    assert "<details><summary>Info (1)</summary>" in md  # new cell
    assert "| numerics | 0 | 1 | 0 | 0 |" in md


def test_markdown_names_the_other_packages_whose_versions_moved():
    """A variant's or a channel's package beside torch and onnxscript: each side says which
    version it ran; a package at the same version on both sides is left out."""
    sides = []
    for run_id, probe in (("A", "1.3"), ("B", "1.4")):
        manifest = typed_manifest(run_id)
        versions = {**manifest.versions["base"], "probe_core": probe, "numpy": "2.1.0"}
        sides.append(Run(dataclasses.replace(manifest, versions={"base": versions}), (), run_id))
    line = to_markdown(compare_runs(*sides)).splitlines()[2]
    assert line.startswith("Candidate `B` (torch 2.9.0, onnxscript 0.5.0, onnxruntime 1.20.0, ")
    assert "probe_core 1.4) against `A` (" in line and "probe_core 1.3)" in line
    assert "numpy" not in line


def test_json_lists_findings_and_counts_unchanged():
    doc = to_json(comparison())
    assert doc["counts"]["unchanged"] == 1 and doc["counts"]["cells"] == 5
    assert doc["counts"]["by_severity"] == {
        "blocking": 0,
        "warning": 2,
        "improvement": 2,
        "info": 1,
    }
    assert {f["kind"] for f in doc["findings"]} == {
        "numerics_error_grew",
        "cell_vanished",
        "status_fixed",
        "metric_improved",
        "cell_appeared",
    }
    faster = next(f for f in doc["findings"] if f["kind"] == "metric_improved")
    assert (
        faster["ratio"] < 0.7 and faster["threshold"] == pytest.approx(1.1) and faster["evidence"]
    )
    json.dumps(doc, allow_nan=False)


def test_junit_has_one_testcase_per_cell():
    root = ET.fromstring(to_junit(comparison()))
    names = [c.get("name") for c in root.iter("testcase")]
    assert len(names) == 5 and len(set(names)) == 5
    assert root.find("testsuite").get("failures") == "0"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 50])
def test_benchmark_stats_match_pytest_benchmark(n):
    rng = random.Random(n)
    data = [rng.lognormvariate(0, 0.3) for _ in range(n)]
    oracle = Stats()
    for x in data:
        oracle.update(x)
    ours = benchmark_stats(data)
    for name in Stats.fields:
        assert ours[name] == pytest.approx(getattr(oracle, name)), name


def test_pytest_benchmark_compare_reads_our_json(tmp_path: Path, monkeypatch, capsys):
    """The file loads with pytest-benchmark's own storage and `pytest-benchmark compare` renders it."""
    from pytest_benchmark import cli
    from pytest_benchmark.logger import Logger
    from pytest_benchmark.storage.file import FileStorage

    doc = to_pytest_benchmark(comparison().candidate)
    assert {b["group"] for b in doc["benchmarks"]} == {"ort_latency", "export_time"}
    assert all(b["stats"]["rounds"] == len(b["stats"]["data"]) for b in doc["benchmarks"])
    path = tmp_path / "0001_candidate.json"
    path.write_text(json.dumps(doc))
    benches = list(FileStorage(tmp_path, logger=Logger(Logger.QUIET)).load_benchmarks(str(path)))
    assert len(benches) == 4 and all("ops" in b and "fullname" in b for b in benches)

    monkeypatch.setattr(
        "sys.argv",
        [
            "pytest-benchmark",
            "--storage",
            f"file://{tmp_path}",
            "compare",
            str(path),
            "--group-by",
            "group",
        ],
    )
    cli.main()
    out = capsys.readouterr().out
    assert "ort_latency[fast--dynamo--op18--cpu--static--base]" in out and "export_time" in out
