"""Every flag of `harness run` goes through a real run directory that `report`, `compare`,
`--resume` and `repro` then accept: a writer and a reader that disagree about a value (a
`--dynamic-only` run once wrote a manifest its own reader refused, issue 34) fail here.

The flags come from the argparse parser, so a new flag that no run below names fails the
test until a run takes it (or it is listed, with the test that does, in ELSEWHERE)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.plan.build import RunOptions
from harness.store.axes import BATCH, DTYPE, ORT_OPT, PATCH
from harness.store.options import Shapes
from harness.store.rundir import read_manifest, read_records
from tests.conftest import FIXTURES, run_cli

TINY, SUITE = str(FIXTURES / "tiny"), str(FIXTURES / "tiny_suite.toml")
SELECT = ("--zoo", TINY, "--opsets", "17")

# Three runs, one per shape flag (they exclude each other); together they name every flag.
RUNS: dict[str, tuple[str, ...]] = {
    "dynamic-only": (
        *("--suite", SUITE, "--zoo", TINY, "--models", "tiny_mlp", "--exporters", "dynamo"),
        *("--opsets", "18"),
        *("--dynamic-only", "--devices", "cpu", "--patches", "none", "--keep-onnx"),
        *("--keep-graphs", "--threads", "1", "--timeout", "120", "--max-memory-gb", "4"),
        *("--dtypes", "float16", "--batches", "3"),
    ),
    "static-only": (
        *("--suite", SUITE, *SELECT, "--models", "tiny_cummax", "--exporters", "torchscript"),
        *("--static-only", "--no-report", "--repro-bound", "30"),
    ),
    "dynamic": (
        *("--suite", SUITE, *SELECT, "--models", "tiny_conv", "--exporters", "torchscript"),
        *("--dynamic", "--ort-opt", "all", "--protocol", "min_iters=4,latency_threads=[2]"),
        "--keep-graphs",  # a folder shared by runs: its path is added below
    ),
}
SHAPES = {"dynamic-only": Shapes.ONLY, "static-only": Shapes.STATIC, "dynamic": Shapes.BOTH}
# Flags a run here cannot take in two minutes, and the test that takes them.
ELSEWHERE = {
    "--variant": "tests/ray/test_publish_channels.py::test_the_site_shows_the_cell_a_newer_package_breaks_as_the_channels_difference",
    "--address": "tests/ray/test_distribution.py::test_a_ray_start_cluster_is_joined_and_never_captures_a_local_run",
    "--local": "every run here (tests/conftest.py: without_ray)",
    "--resume": "every run below is resumed",
}


def run_flags() -> set[str]:
    """Every option string of `harness run`, as its parser declares them."""
    parser = build_parser()
    (verbs,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run = verbs.choices["run"]
    return {
        s for a in run._actions if not isinstance(a, argparse._HelpAction) for s in a.option_strings
    }


def test_every_flag_of_harness_run_is_taken_by_a_run_here() -> None:
    named = {arg for args in RUNS.values() for arg in args if arg.startswith("--")} | {"--out"}
    missing = run_flags() - named - set(ELSEWHERE)
    assert not missing, f"flags of `harness run` no test run takes: {sorted(missing)}"
    assert named <= run_flags(), sorted(named - run_flags())  # no stale name here
    for test in ELSEWHERE.values():
        path, _, name = test.partition("::")
        assert not name or f"def {name}(" in (Path(__file__).parents[2] / path).read_text()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("flags")
    made = {}
    for name, args in RUNS.items():
        out = root / name
        extra = (str(root / "graphs"),) if name == "dynamic" else ()
        result = run_cli("run", *args, *extra, "--out", str(out))  # every run names --out
        assert result.returncode == 0, result.stderr[-3000:]
        made[name] = out
    return made


@pytest.mark.parametrize("name", list(RUNS))
def test_the_run_directory_reads_back_and_every_command_takes_it(
    runs: dict[str, Path], name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runs[name]
    manifest = read_manifest(run)
    options = RunOptions.from_dict(dict(manifest.options))
    assert options.dynamic is SHAPES[name]
    assert manifest.finished is not None and manifest.cells == len(read_records(run))
    assert main(["report", str(run)]) == 0
    assert (run / "report.md").is_file()
    # 1: a finding (the failing cell against expected/status.csv); 2 would be a refusal
    assert main(["compare", str(run), str(run)]) == (1 if name == "static-only" else 0)
    before = (run / "records.jsonl").read_text()
    resumed = run_cli("run", "--resume", str(run), f"--{name}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (run / "records.jsonl").read_text() == before  # every cell was recorded already
    capsys.readouterr()


def test_the_options_each_run_took_are_in_its_manifest(runs: dict[str, Path]) -> None:
    first = RunOptions.from_dict(dict(read_manifest(runs["dynamic-only"]).options))
    assert (first.keep_onnx, first.keep_graphs, first.threads) == (True, "run", 1)
    assert (first.timeout_s, first.max_memory_gb, first.values(PATCH)) == (120.0, 4.0, ("none",))
    assert first.devices == ("cpu",) and first.exporters == ("dynamo",)
    assert first.values(DTYPE) == ("float16",) and first.values(BATCH) == ("3",)
    record = next(iter(read_records(runs["dynamic-only"])))
    assert record.status == "ok" and record.dynamic and "onnx" in record.artifacts
    assert record.cell[BATCH] == 3 and record.cell.cell_id.endswith("--float16--batch3")
    assert record.dtype == "float16" and record.numerics.precision_loss is not None
    assert any((runs["dynamic-only"] / "graphs").iterdir())
    shared = RunOptions.from_dict(dict(read_manifest(runs["dynamic"]).options))
    assert shared.keep_graphs == str(runs["dynamic"].parent / "graphs")
    assert shared.values(ORT_OPT) == ("all",)
    for record in read_records(runs["dynamic"]):
        assert record.ort_opt == "all" and record.ort.optimizers is not None
    # --protocol over the suite's [protocol]; $HARNESS_PROTOCOL (tests/conftest.py) is the
    # flag's default, taken by a run that names none: the loops and the manifest follow them
    settings = read_manifest(runs["dynamic"]).settings
    assert settings.protocol["min_iters"] == 4 and settings.latency_threads == (2,)
    assert settings.protocol["max_time_s"] == 0.5  # the suite's, not the variable's
    for record in read_records(runs["dynamic"]):
        assert record.ort.latency is not None and record.ort.latency.n >= 4
        assert record.thread_latency is not None and set(record.thread_latency) == {"2"}
    static = read_manifest(runs["static-only"])
    assert static.options["protocol"] == os.environ["HARNESS_PROTOCOL"]
    assert static.settings.protocol["max_time_s"] == 0.05  # the variable's over the suite's


def test_a_failure_of_a_run_is_repro_d(runs: dict[str, Path]) -> None:
    run = runs["static-only"]
    (failed,) = read_records(run)
    assert (failed.status, failed.model) == ("export_failed", "tiny_cummax")
    assert failed.minimal_repro is not None  # --repro-bound: made by the run itself
    assert main(["repro", str(run), failed.cell.cell_id, "--bound", "30", "--no-report"]) == 0
    (again,) = read_records(run)
    assert again.minimal_repro is not None and again.minimal_repro.kind == "export"
