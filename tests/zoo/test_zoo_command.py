"""`harness zoo refresh NAME` and `harness zoo expected RUN_DIR`: real captures, a real
op_db, a real transformers probe in its worker process, real run directories; and the
older spellings, which say so and do the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main as cli_main
from harness.store import rundir
from harness.store.records import Cell, Measurements, Record
from harness.store.status import Status
from harness.zoo import expected_file
from harness.zoo.generated import opinfo_inventory
from tests.conftest import FIXTURES, REPO, run_cli
from tests.fixtures_compare import typed_manifest

COVERAGE_ZOO = FIXTURES / "coverage"


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ")
    return err


def test_zoo_help_lists_its_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main(["zoo", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for line in ("refresh ", "expected "):
        assert any(row.strip().startswith(line) for row in out.splitlines()), out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["zoo"], "ACTION"),
        (["zoo", "refresh", "nope"], "invalid choice: 'nope'"),
        (["zoo", "refresh", "ops", "--types", "bert"], "--types goes with transformers"),
        (["zoo", "refresh", "transformers", "--zoo", "x"], "--zoo goes with ops"),
        (["zoo", "refresh", "opinfo", "--ops", ","], "comma-separated list"),
        (["zoo", "refresh", "transformers", "--jobs", "0"], "positive numbers"),
    ],
)
def test_bad_refresh_input_exits_2_with_one_line(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(argv) == 2
    assert says in _one_error_line(capsys)


def test_expected_of_a_missing_run_dir_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["zoo", "expected", str(tmp_path / "missing")]) == 2
    assert "is not a run directory" in _one_error_line(capsys)


# -- refresh ------------------------------------------------------------------------------------


@pytest.mark.slow  # worker processes that build and run models: 4-10 s
def test_refresh_ops_captures_the_selected_zoo_models(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "inventory.json"
    argv = ["zoo", "refresh", "ops", "--zoo", str(COVERAGE_ZOO), "--models", "cov_*"]
    assert cli_main([*argv, "--out", str(out)]) == 0
    inventory = json.loads(out.read_text())
    assert set(inventory["models"]) == {"cov_plain", "cov_cummax", "cov_erfcx", "cov_logcumsumexp"}
    ops = {e["op"] for e in inventory["ops"]}
    assert {"aten.conv2d.default", "aten.cummax.default"} <= ops
    assert "harness zoo refresh ops" in inventory["about"]
    assert capsys.readouterr().out.strip().endswith(f"-> {out}")

    # The older spelling says which command replaces it and writes the same inventory.
    old = tmp_path / "old.json"
    legacy = ["coverage", "--refresh-inventory", "--zoo", str(COVERAGE_ZOO), "--models", "cov_*"]
    assert cli_main([*legacy, "--inventory", str(old)]) == 0
    assert "deprecated: use `harness zoo refresh ops`" in capsys.readouterr().err
    assert {e["op"] for e in json.loads(old.read_text())["ops"]} == ops


def test_refresh_opinfo_lists_only_the_named_opinfos_and_merges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "inventory.json"
    assert cli_main(["zoo", "refresh", "opinfo", "--ops", "add", "--out", str(out)]) == 0
    only_add = json.loads(out.read_text())
    assert [(e["name"], e["variant"]) for e in only_add["opinfos"]] == [("add", "")]
    assert only_add["opinfos"][0]["samples"]["float32"] > 0

    argv = ["zoo", "refresh", "opinfo", "--ops", "nn.functional.relu", "--merge"]
    assert cli_main([*argv, "--out", str(out)]) == 0
    merged = json.loads(out.read_text())
    assert [e["name"] for e in merged["opinfos"]] == ["add", "nn.functional.relu"]
    assert merged["opinfos"][0] == only_add["opinfos"][0]
    capsys.readouterr()

    # A name that selects nothing, and a partial refresh of the zoo's own file without
    # --merge (it would drop every other OpInfo), are refused.
    assert cli_main(["zoo", "refresh", "opinfo", "--ops", "nosuch_op", "--out", str(out)]) == 2
    assert "nosuch_op: no OpInfo" in _one_error_line(capsys)
    assert cli_main(["zoo", "refresh", "opinfo", "--ops", "add"]) == 2
    assert "add --merge" in _one_error_line(capsys)


def test_opinfo_names_select_by_name_variant_and_glob() -> None:
    chosen = [key for key, _ in opinfo_inventory._chosen(["max.binary", "nn.functional.relu*"])]
    assert ("max", "binary") in chosen and ("max", "reduction_no_dim") not in chosen
    assert {k for k in chosen if k[0].startswith("nn.functional.relu")} >= {
        ("nn.functional.relu", ""),
        ("nn.functional.relu6", ""),
    }


@pytest.mark.slow  # worker processes that build and run models: 4-10 s
def test_refresh_transformers_probes_the_named_types(tmp_path: Path) -> None:
    """One real probe (a worker process builds a shrunk bert and runs it in eager); the
    older `python -m model_zoo.transformers._refresh` says so and drops a type the
    registry lacks as before."""
    out = tmp_path / "inventory.json"
    argv = ["zoo", "refresh", "transformers", "--types", "bert", "--jobs", "1"]
    result = run_cli(*argv, "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    inventory = json.loads(out.read_text())
    assert list(inventory["models"]) == ["bert"]
    assert "reason" not in inventory["models"]["bert"], inventory["models"]["bert"]
    assert "harness zoo refresh transformers" in inventory["about"]
    assert result.stdout.strip().endswith(f"1 of 1 model types build and run in eager; wrote {out}")

    old = tmp_path / "old.json"
    legacy = ["-m", "model_zoo.transformers._refresh", "--types", "nosuchtype", "--jobs", "1"]
    result = _python(*legacy, "--out", str(old))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "use `harness zoo refresh transformers`" in result.stderr
    assert "dropped: nosuchtype" in result.stdout
    assert json.loads(old.read_text())["models"] == {}


def _python(*args: str):
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )


# -- expected -----------------------------------------------------------------------------------


def _failing(model: str, family: str) -> Record:
    error = RuntimeError("export failed")
    error.__cause__ = KeyError("no lowering")
    cell = Cell(model, "dynamo", 18, family=family)
    return Record.finished(
        cell, "r", Measurements(), status=Status.EXPORT_FAILED, stage="translate", error=error
    )


def _run(tmp_path: Path, *records: Record) -> Path:
    run = tmp_path / "run"
    rundir.write_manifest(run, typed_manifest("r"))
    with rundir.RecordWriter(run) as writer:
        for r in records:
            writer.write(r)
    return run


def test_expected_rewrites_the_file_of_the_zoo_the_run_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run(tmp_path, _failing("hf.a", "transformers"), _failing("plain", "seed"))
    path = tmp_path / "expected.csv"
    assert cli_main(["zoo", "expected", str(run), "--expected", str(path)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {path}: 1 rows (0 before)")
    (row,) = expected_file.read(path).rows
    assert (row.model, row.exporter, row.status) == ("hf.a", "dynamo", Status.EXPORT_FAILED)
    assert row.match is not None and row.match.startswith("^")  # transformers pins the type
    assert "transformers suite's known failures" in path.read_text()


def test_expected_refuses_a_run_of_no_generated_zoo_and_one_file_for_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _run(tmp_path / "plain", _failing("plain", "seed"))
    assert cli_main(["zoo", "expected", str(plain)]) == 2
    assert "holds no cell of a zoo that keeps expected failures" in _one_error_line(capsys)

    both = _run(tmp_path / "both", _failing("hf.a", "transformers"), _failing("o", "opinfo"))
    assert cli_main(["zoo", "expected", str(both), "--expected", str(tmp_path / "x.csv")]) == 2
    assert "--expected names one file" in _one_error_line(capsys)
    assert not (tmp_path / "x.csv").exists()


def test_the_older_transformers_expected_says_so_and_writes_the_same(tmp_path: Path) -> None:
    run = _run(tmp_path, _failing("hf.a", "transformers"), _failing("o", "opinfo"))
    path = tmp_path / "expected.csv"
    result = _python("-m", "model_zoo.transformers._expected", str(run), "--out", str(path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "use `harness zoo expected RUN_DIR`" in result.stderr
    assert [r.model for r in expected_file.read(path).rows] == ["hf.a"]  # opinfo's stay out
