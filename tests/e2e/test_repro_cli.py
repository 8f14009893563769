"""`harness run` makes a minimal repro for the first cell of each failure cluster, and
`harness repro` makes them for an existing run: the real CLI, real minimizer processes
(issue 27). The run's repros of three of the deliberately broken models (a deep untranslated
op, a graph the checker refuses, a mismatch made at capture) are also what
tests/repro/test_minimize.py asks of a repro: a few nodes failing the same way in a fresh
process, a plain script, a capture mismatch said as such; that module shrinks the others."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.store.details import MinimalRepro
from harness.store.diagnosis import repro_text
from harness.store.records import Record
from harness.store.rundir import read_records
from tests.conftest import FIXTURES, run_cli
from tests.repro import assert_shrunk_to_a_few_nodes_failing_alike

MODELS = "repro_untranslated,repro_checker_invalid,repro_export_only"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "run"
    result = run_cli(
        "run", "--zoo", str(FIXTURES / "repro"), "--models", MODELS, "--exporters", "dynamo",
        "--opsets", "18", "--out", str(out), "--repro-bound", "60",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "minimal repros: 3 failure clusters, search bound 60 s each" in result.stderr
    return out


def test_the_run_records_a_verified_repro_for_each_cluster(run_dir: Path) -> None:
    records = {r.model: r for r in read_records(run_dir)}
    for model in ("repro_untranslated", "repro_checker_invalid"):
        made = records[model].minimal_repro
        assert made is not None and made.reproduces is True, made
        assert made.nodes_after is not None and made.nodes_after <= 3, made
        assert (run_dir / records[model].artifacts["minimal_repro"]).is_file()
    repro = records["repro_export_only"].minimal_repro
    assert repro is not None and (repro.reason or "").startswith("capture")
    found = records["repro_export_only"].numerics.mismatch_stage
    assert found is not None and found.stage == "capture"


def test_the_report_links_each_repro(run_dir: Path) -> None:
    text = (run_dir / "report.md").read_text()
    record = next(r for r in read_records(run_dir) if r.model == "repro_untranslated")
    assert f"[{repro_text(record)}]({record.artifacts['minimal_repro']})" in text
    assert (repro_text(record) or "").startswith("reproduces, ")
    assert "| changed by |" in text and "capture" in text


def test_harness_repro_remakes_one_cell(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a copy of the run: the module's run keeps the repros the run made."""
    run_dir = Path(shutil.copytree(run_dir, tmp_path / "run"))
    record = next(r for r in read_records(run_dir) if r.model == "repro_checker_invalid")
    before = (run_dir / "records.jsonl").read_text().splitlines()
    assert main(["repro", str(run_dir), record.cell.cell_id, "--bound", "30", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert "1 of 1 cells with a repro that reproduces in a fresh process" in out
    after = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(after) == len(before) == 3
    changed = [json.loads(a)["model"] for a, b in zip(after, before, strict=True) if a != b]
    assert changed == ["repro_checker_invalid"]  # the others are kept byte for byte
    remade = next(json.loads(a) for a in after if json.loads(a)["model"] == "repro_checker_invalid")
    assert remade["minimal_repro"]["bound_s"] == 30 and remade["minimal_repro"]["reproduces"]


def test_bad_cells_and_unfinished_runs_exit_2(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["repro", str(run_dir), "no--such--cell"]) == 2
    assert "no cell 'no--such--cell' in this run" in capsys.readouterr().err
    unfinished = tmp_path / "unfinished"
    shutil.copytree(run_dir, unfinished)
    manifest = json.loads((unfinished / "manifest.json").read_text())
    manifest["finished"] = None
    (unfinished / "manifest.json").write_text(json.dumps(manifest))
    assert main(["repro", str(unfinished)]) == 2
    assert "is not finished" in capsys.readouterr().err


# -- what a repro is (tests/repro/test_minimize.py shrinks the other broken models) ----------


def _made(run_dir: Path, model: str) -> tuple[Record, MinimalRepro]:
    record = next(r for r in read_records(run_dir) if r.model == model)
    assert record.minimal_repro is not None, record
    return record, record.minimal_repro


@pytest.mark.parametrize(
    ("model", "kind", "at_least"),
    [("repro_untranslated", "export", 150), ("repro_checker_invalid", "check", 40)],
)
def test_a_deep_failure_shrinks_to_a_few_nodes_that_fail_the_same_way_in_a_fresh_process(
    run_dir: Path, model: str, kind: str, at_least: int
) -> None:
    record, repro = _made(run_dir, model)
    assert_shrunk_to_a_few_nodes_failing_alike(
        repro,
        kind,
        at_least,
        run_dir / record.artifacts["minimal_repro"],
        run_dir / record.artifacts["minimal_repro_inputs"],
    )


def test_the_script_is_plain_torch_onnx_and_onnxruntime(run_dir: Path) -> None:
    record, _ = _made(run_dir, "repro_untranslated")
    text = (run_dir / record.artifacts["minimal_repro"]).read_text()
    imports = {ln.split()[1] for ln in text.splitlines() if ln.startswith(("import ", "from "))}
    assert imports <= {
        "copy",
        "re",
        "sys",
        "traceback",
        "pathlib",
        "numpy",
        "onnx",
        "onnxruntime",
        "torch",
    }
    assert "torch.ops.aten.polygamma.default" in text
    assert "torch 2.13" in text and "onnxruntime" in text.split('"""')[1]  # versions in the header


def test_a_mismatch_made_at_capture_gets_no_onnx_subgraph_and_says_why(run_dir: Path) -> None:
    _, repro = _made(run_dir, "repro_export_only")
    assert repro.reason and repro.reason.startswith("capture changed the numbers")
    assert "the failure is in the model's own forward (Deep.forward)" in repro.reason
    assert "blocks.0 passes" in repro.reason
    assert repro.method == "module" and (repro.params_before or 0) > 0
    assert repro.reproduces is None
