"""A checkpoint by name through a real run directory: `harness run --models hf:DIR` gives
the same verdicts and graphs as the same architecture built from its config with the same
weights, and every command that reads the run takes its model by its name."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.commands.repro import run_sources
from harness.store import rundir
from tests.conftest import FIXTURES, run_cli
from tests.zoo_fixtures.checkpoint.from_config import built


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("checkpoint")
    torch.manual_seed(0)  # the harness's seed: the weights `bert_from_config` builds too
    built().save_pretrained(root / "tiny-bert")
    out = root / "run"
    result = run_cli(
        "run", "--zoo", str(FIXTURES / "checkpoint"), "--models", "hf:./tiny-bert,bert_from_config",
        "--exporters", "dynamo,torchscript", "--opsets", "18", "--static-only", "--out", str(out),
        "--repro-bound", "0", cwd=root,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_the_checkpoint_gives_the_verdicts_and_graphs_of_its_architecture(run: Path) -> None:
    records = {(r.model, r.exporter): r for r in rundir.read_records(run)}
    for exporter in ("dynamo", "torchscript"):
        mine, built_here = (
            records[("ckpt.tiny-bert", exporter)],
            records[("bert_from_config", exporter)],
        )
        assert mine.status == built_here.status == "ok"
        assert mine.export.graph_fingerprint == built_here.export.graph_fingerprint
        assert mine.metadata and mine.metadata["class"] == "BertForSequenceClassification"


def test_every_command_that_reads_the_run_takes_the_checkpoints_model(
    run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(run)]) == 0
    assert "ckpt.tiny-bert" in (run / "report.md").read_text()
    assert main(["compare", str(run), str(run), "--no-expected", "--out", str(tmp_path / "c")]) == 0
    # repro and debt find the model's source again from the run's options (its hf: name,
    # given relative to the run's folder, kept absolute), here from the repository's folder
    sources = run_sources(run)
    assert sources["ckpt.tiny-bert"] == f"checkpoint:{run.parent / 'tiny-bert'}"
    cell = next(r for r in rundir.read_records(run) if r.model == "ckpt.tiny-bert").cell.cell_id
    assert main(["repro", str(run), cell, "--bound", "5", "--no-report"]) == 2
    assert capsys.readouterr().err.strip().endswith("is ok: no failure a repro applies to")
    resumed = run_cli("run", "--resume", str(run))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
