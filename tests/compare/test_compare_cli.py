"""`harness compare` end to end on synthetic run directories: exit codes and outputs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.cli import main
from tests.fixtures_compare import manifest, record, smoke_cells, write_run


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in tmp_path so that the repository's expected/status.csv does not apply."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    return {
        "base": write_run(tmp_path / "base", manifest("base"), smoke_cells(1)),
        "same": write_run(tmp_path / "same", manifest("same", torch="2.10.0"), smoke_cells(2)),
        "slow": write_run(tmp_path / "slow", manifest("slow"), smoke_cells(3, slow=1.3)),
        "broken": write_run(tmp_path / "broken", manifest("broken"), smoke_cells(4, broken=True)),
    }


def test_nothing_blocking_exits_0(runs, capsys):
    assert main(["compare", str(runs["base"]), str(runs["same"])]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("## ✅")


def test_blocking_regression_exits_1_with_the_verdict_first(runs, capsys):
    assert main(["compare", str(runs["base"]), str(runs["broken"])]) == 1
    md = capsys.readouterr().out
    assert md.splitlines()[0] == "## ❌ harness compare: 1 blocking regression"
    assert md.index("### Blocking") < md.index("<details>")
    assert "ok -> export_failed at translate" in md and "aten.cummax.default" in md


def test_latency_regression_exits_1_and_never_overrides(runs):
    assert main(["compare", str(runs["base"]), str(runs["slow"])]) == 1
    assert main(["compare", str(runs["base"]), str(runs["slow"]), "--fail-on", "never"]) == 0


def test_json_format(runs, capsys):
    main(["compare", str(runs["base"]), str(runs["slow"]), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert (
        doc["verdict"] == "fail" and doc["counts"]["cells"] == 4 and doc["counts"]["unchanged"] == 1
    )
    f = next(f for f in doc["findings"] if f["severity"] == "blocking")
    assert (
        f["kind"] == "metric_regressed"
        and f["metric"] == "ort_latency"
        and f["model"].startswith("m")
    )
    assert (
        f["ratio"] > 1.2
        and f["threshold"] == pytest.approx(1.1)
        and "Mann-Whitney" in f["evidence"]
    )


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_missing_run_dir_exits_2(runs, tmp_path, capsys):
    assert main(["compare", str(runs["base"]), str(tmp_path / "nope")]) == 2
    assert "not a run directory" in one_error_line(capsys)


def test_schema_too_new_exits_2(runs, tmp_path, capsys):
    newer = write_run(tmp_path / "newer", manifest("newer", schema=99), [record()])
    assert main(["compare", str(runs["base"]), str(newer)]) == 2
    assert "schema 99" in one_error_line(capsys)


def test_record_schema_too_new_exits_2(runs, tmp_path, capsys):
    path = write_run(tmp_path / "newrec", manifest("newrec"), [record()])
    line = json.loads((path / "records.jsonl").read_text())
    (path / "records.jsonl").write_text(json.dumps({**line, "schema": 7}) + "\n")
    assert main(["compare", str(runs["base"]), str(path)]) == 2
    assert "newer than this harness" in one_error_line(capsys)


def test_empty_candidate_exits_2(runs, tmp_path, capsys):
    empty = write_run(tmp_path / "empty", manifest("empty"), [])
    assert main(["compare", str(runs["base"]), str(empty)]) == 2
    assert "no records" in one_error_line(capsys)


def test_different_hardware_exits_2_unless_allowed(runs, tmp_path, capsys):
    other = write_run(
        tmp_path / "other",
        manifest("other", hardware={"cpu": "Other", "cores": 4, "gpus": []}),
        smoke_cells(5, slow=2.0),
    )
    assert main(["compare", str(runs["base"]), str(other)]) == 2
    assert "not comparable" in one_error_line(capsys)
    assert main(["compare", str(runs["base"]), str(other), "--allow-different-hardware"]) == 0


def test_usage_errors_exit_2(runs, capsys):
    assert main(["compare", str(runs["base"])]) == 2
    assert "BASELINE CANDIDATE" in one_error_line(capsys)
    assert main(["compare", str(runs["base"]), str(runs["same"]), "--expected", "nope.csv"]) == 2
    assert "nope.csv" in one_error_line(capsys)


def test_out_writes_every_output(runs, tmp_path):
    out = tmp_path / "out"
    main(["compare", str(runs["base"]), str(runs["broken"]), "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == [
        "benchmark.json",
        "compare.json",
        "compare.md",
        "junit.xml",
    ]
    root = ET.parse(out / "junit.xml").getroot()
    cases = root.findall("./testsuite/testcase")
    assert len(cases) == 4 and len({c.get("name") for c in cases}) == 4
    failing = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failing] == ["m3--dynamo--op18--cpu--static--base"]
    assert root.find("testsuite").get("failures") == "1"


def test_github_step_summary_is_appended(runs, tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    main(["compare", str(runs["base"]), str(runs["broken"]), "--format", "json"])
    text = summary.read_text()
    assert text.startswith("earlier step\n## ❌ harness compare")


def test_expected_file_ratchet_and_update(runs, tmp_path, capsys):
    expected = tmp_path / "expected" / "status.csv"
    assert (
        main(["compare", "--update-expected", str(runs["broken"])]) == 0
    )  # default path, cwd-relative
    assert "m3,dynamo,18,cpu,*,*,export_failed,translate,," in expected.read_text()
    capsys.readouterr()
    # the known failure no longer blocks; fixing it is reported with the update command
    assert main(["compare", str(runs["base"]), str(runs["broken"])]) == 0
    assert main(["compare", str(runs["broken"]), str(runs["base"])]) == 0
    assert (
        "harness compare --update-expected --expected expected/status.csv"
        in capsys.readouterr().out
    )
    assert main(["compare", str(runs["base"]), str(runs["broken"]), "--no-expected"]) == 1


def test_help_documents_the_update_command(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "harness compare --update-expected" in capsys.readouterr().out


def test_two_variants_of_one_run_compare_cell_by_cell(tmp_path, capsys):
    """`harness run --variant new=transformers==X` puts both sides in one run directory;
    `--variants base,new` compares them as two runs (the manifest's versions per variant)."""
    base = smoke_cells(1)
    new = [r.with_cell(variant="new") for r in smoke_cells(4, broken=True)]
    man = manifest("both")
    man["versions"] = {
        "base": {**man["versions"]["base"], "transformers": "5.23.0"},
        "new": {**man["versions"]["base"], "transformers": "5.22.2"},
    }
    path = write_run(tmp_path / "both", man, [*base, *new])
    assert main(["compare", str(path), "--variants", "base,new"]) == 1
    md = capsys.readouterr().out
    assert md.splitlines()[0] == "## ❌ harness compare: 1 blocking regression"
    assert "`both@base` (" in md and "transformers 5.23.0" in md and "transformers 5.22.2" in md
    assert "ok -> export_failed at translate" in md
    assert main(["compare", str(path), "--variants", "base,old"]) == 2
    err = capsys.readouterr().err
    assert "has no records of variant 'old' (it has: base, new)" in err
    assert main(["compare", str(path), "--variants", "base"]) == 2
