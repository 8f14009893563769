"""Deliberately broken models each get a repro of a few nodes that reproduces in a fresh
process (issue 27's "done when"): real cells, a real minimizer process per cell, each
script run in another fresh process that cannot import the harness. The dynamo cells of
repro_untranslated, repro_checker_invalid and repro_export_only are shrunk by the run of
tests/e2e/test_repro_cli.py, and checked there the same way (once, not in both)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from harness.repro import runner, script
from harness.repro.job import Job
from harness.repro.minimize import minimize
from harness.repro.oracle import Target
from harness.repro.program import Program
from harness.runtime.worker import run_cell
from harness.store.details import MinimalRepro
from harness.store.records import Cell, CellTask, Record
from harness.store.rundir import RecordWriter, read_records
from harness.store.status import Stage
from tests.conftest import FIXTURES
from tests.repro import assert_shrunk_to_a_few_nodes_failing_alike

# Every test here shrinks real failing models in fresh processes (tens of seconds each).
pytestmark = pytest.mark.slow

BROKEN = FIXTURES / "repro" / "broken.py"
CELLS = [
    ("repro_wrong_constant", "dynamo"),
    ("repro_untranslated", "torchscript"),
    ("repro_capture_fails", "dynamo"),
]


@dataclass(frozen=True)
class Run:
    dir: Path
    records: dict[tuple[str, str], Record]

    def repro(self, model: str, exporter: str = "dynamo") -> MinimalRepro:
        found = self.records[(model, exporter)].minimal_repro
        assert found is not None, self.records[(model, exporter)]
        return found

    def artifact(self, model: str, key: str, exporter: str = "dynamo") -> Path:
        return self.dir / self.records[(model, exporter)].artifacts[key]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run_dir = tmp_path_factory.mktemp("run")
    records = [
        run_cell(CellTask(Cell(model, exporter, 18), str(BROKEN), "t", str(run_dir)))
        for model, exporter in CELLS
    ]
    with RecordWriter(run_dir) as writer:
        for r in records:
            writer.write(r)
    sources = {model: str(BROKEN) for model, _ in CELLS}
    runner.make_repros(run_dir, records, sources, bound_s=60, jobs=2)
    return Run(run_dir, {(r.model, r.exporter): r for r in read_records(run_dir)})


@pytest.mark.parametrize(
    ("model", "exporter", "kind", "at_least"),
    [
        ("repro_wrong_constant", "dynamo", "numerics", 40),
        ("repro_untranslated", "torchscript", "export", 150),
    ],
)
def test_a_deep_failure_shrinks_to_a_few_nodes_that_fail_the_same_way_in_a_fresh_process(
    run: Run, model: str, exporter: str, kind: str, at_least: int
) -> None:
    assert_shrunk_to_a_few_nodes_failing_alike(
        run.repro(model, exporter),
        kind,
        at_least,
        run.artifact(model, "minimal_repro", exporter),
        run.artifact(model, "minimal_repro_inputs", exporter),
    )


def test_the_numerics_script_fails_with_an_assertion_naming_the_node(run: Run) -> None:
    # run by the harness in a fresh process of its own that cannot import the harness
    verify = run.repro("repro_wrong_constant").verify or {}
    assert verify["exit_code"] == 1, verify
    assert "AssertionError: node shift:" in verify["output"]
    # the custom op (and its wrong translation) come from their own module, loaded by file
    assert run.repro("repro_wrong_constant").imports == ("harness_repro_shift_op",)


def test_a_capture_failure_falls_back_to_the_records_facts_and_says_so(run: Run) -> None:
    repro = run.repro("repro_capture_fails")
    assert repro.kind == "capture"
    assert repro.reason and "captured no program" in repro.reason
    # the branch is in the model's own forward: no block fails alone
    assert "the failure is in the model's own forward (Deep.forward)" in repro.reason
    assert "blocks.0 passes" in repro.reason
    assert repro.reproduces is None
    assert "minimal_repro" not in run.records[("repro_capture_fails", "dynamo")].artifacts


def test_the_search_stops_at_its_bound(tmp_path: Path) -> None:
    record = run_cell(
        CellTask(Cell("repro_untranslated", "dynamo", 18), str(BROKEN), "t", str(tmp_path))
    )
    summary = minimize(Job(record.to_dict(), str(BROKEN), str(tmp_path), bound_s=0.001))
    assert summary.nodes_after is None and summary.script is None
    assert "time bound ran out" in (summary.reason or "")
    assert summary.bound_s == 0.001


def test_a_script_whose_failure_is_gone_exits_zero(tmp_path: Path) -> None:
    """The repro of a fixed bug: the node's value matches, the script says so and exits 0."""
    torch.manual_seed(0)
    model, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval(), torch.rand(2, 4)
    program = Program(torch.export.export(model, (x,)), [x])
    node = program.dag.order[-1]
    candidate = program.candidate([node], (node,))
    target = Target("dynamo", 18, Stage.NUMERICS, node=node)
    script.write(
        tmp_path, candidate, target, script.About("cell", "run", 1, program.size, "a program")
    )
    out = subprocess.run(
        [sys.executable, str(tmp_path / script.SCRIPT)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"not reproduced: node {node} matches" in out.stdout
