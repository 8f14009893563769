"""Failures the graph minimizer cannot take get a repro of one block (issue 37's "done
when"): real cells of 12-block models, a real minimizer process per cell, each script run
in another fresh process that cannot import the harness."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.repro import runner
from harness.runtime.worker import run_cell
from harness.store.details import MinimalRepro
from harness.store.diagnosis import repro_text
from harness.store.records import Cell, CellTask, Record
from harness.store.rundir import RecordWriter, read_records
from tests.conftest import FIXTURES

# Every test here shrinks real failing models in fresh processes (tens of seconds each).
pytestmark = pytest.mark.slow

BLOCKS = FIXTURES / "repro" / "blocks.py"
CELLS = [
    Cell("repro_block_capture", "dynamo", 18),
    Cell("repro_block_export_only", "dynamo", 18),
    Cell("repro_block_tracer", "torchscript", 18),
    Cell("repro_keyword_tracer", "torchscript", 18),
    Cell("repro_block_specialised", "dynamo", 18, dynamic=True),
    Cell("repro_block_tracer_dynamic", "torchscript", 18, dynamic=True),
]


@dataclass(frozen=True)
class Run:
    dir: Path
    records: dict[str, Record]

    def repro(self, model: str) -> MinimalRepro:
        found = self.records[model].minimal_repro
        assert found is not None, self.records[model]
        return found

    def script(self, model: str) -> Path:
        return self.dir / self.records[model].artifacts["minimal_repro"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run_dir = tmp_path_factory.mktemp("run")
    records = [run_cell(CellTask(cell, str(BLOCKS), "t", str(run_dir))) for cell in CELLS]
    with RecordWriter(run_dir) as writer:
        for r in records:
            writer.write(r)
    sources = {cell.model: str(BLOCKS) for cell in CELLS}
    runner.make_repros(run_dir, records, sources, bound_s=60, jobs=1)
    return Run(run_dir, {r.model: r for r in read_records(run_dir)})


@pytest.mark.parametrize(
    ("model", "kind", "block"),
    [
        ("repro_block_capture", "capture", "blocks.7"),
        ("repro_block_export_only", "numerics", "blocks.9"),
        ("repro_block_tracer", "export", "blocks.5"),
        ("repro_keyword_tracer", "export", "blocks.3"),
    ],
)
def test_a_failure_in_one_blocks_code_shrinks_to_that_block_in_a_fresh_process(
    run: Run, model: str, kind: str, block: str
) -> None:
    repro = run.repro(model)
    assert repro.kind == kind
    assert repro.method == "module"
    assert repro.reproduces is True, repro
    assert repro.verify is not None and repro.verify["exit_code"] == 1
    assert repro.module == block and repro.module_class in ("Block", "KeywordBlock")
    assert repro.params_before and repro.params_after
    assert repro.params_before > 20 * repro.params_after > 0
    # Stack > blocks > Block > mixers > Mixer > fc; Block > mixers > Identity
    assert repro.depth_before == 6 and repro.depth_after == 3
    assert repro.replaced == tuple(f"{block}.mixers.{i}" for i in (2, 1, 0))
    assert repro.bound_s == 60 and repro.search_complete
    # the report's line for the cluster
    assert repro_text(run.records[model]) == f"reproduces, module {block} (10388 -> 32 parameters)"


def test_the_script_builds_the_block_from_the_zoo_files_own_classes(run: Run) -> None:
    text = run.script("repro_block_tracer").read_text()
    assert "class Double(torch.autograd.Function):" in text and "class Block(" in text
    assert "class Stack(" not in text  # the model around it is not needed
    assert not re.search(r"^\s*(import|from) harness", text, re.MULTILINE)
    assert "dynamo=False" in text and "onnxruntime" not in text.split('"""', 2)[2]
    # run by the harness in a fresh process of its own that cannot import the harness
    verify = run.repro("repro_block_tracer").verify or {}
    assert verify["exit_code"] == 1, verify
    assert "REPRODUCED at export: TypeError" in verify["output"]


def test_the_mismatch_script_compares_the_block_with_its_own_eager_output(run: Run) -> None:
    verify = run.repro("repro_block_export_only").verify or {}
    assert verify["exit_code"] == 1, verify
    assert "AssertionError: output 0: max_abs" in verify["output"]


def test_a_block_called_by_keyword_goes_through_torchscript_by_keyword(run: Run) -> None:
    """Exported alone with its keyword input, TorchScript binds it to a position and the
    block's decorator passes `use_cache` again; the search and the script call it by
    keyword inside a module that takes the tensor, so it fails the cell's way. torch.export
    captures nothing of this model (a data-dependent branch): the module search still runs."""
    assert "captured no program" in (run.repro("repro_keyword_tracer").reason or "")
    text = run.script("repro_keyword_tracer").read_text()
    assert "class Call(torch.nn.Module):" in text and "torch.onnx.export(Call(module)," in text
    assert "REPRODUCED at export" in (run.repro("repro_keyword_tracer").verify or {})["output"]
    assert "class Call" not in run.script("repro_block_tracer").read_text()  # positional


def test_a_specialised_dynamic_dimension_shrinks_to_the_block_that_specialises_it(
    run: Run,
) -> None:
    """Exported statically, every block and the model pass: the search carries the cell's
    dynamic axis (batch, changed at the second shape) into each block's export, and the
    script exports the block with it."""
    record = run.records["repro_block_specialised"]
    assert record.stage is not None and record.stage.value == "capture"
    assert "tracing specialised a dynamic dimension" in (record.error_signature or "")
    repro = run.repro("repro_block_specialised")
    assert (repro.method, repro.module, repro.reproduces) == ("module", "blocks.6", True), repro
    text = run.script("repro_block_specialised").read_text()
    assert "DYNAMIC = {'input_0': [0]}" in text and "dynamic_shapes=DYNAMIC_SHAPES" in text
    assert "REPRODUCED at export: ValueError" in (repro.verify or {})["output"]


def test_a_dynamic_torchscript_cell_exports_the_block_with_its_axes_by_input_name(
    run: Run,
) -> None:
    repro = run.repro("repro_block_tracer_dynamic")
    assert (repro.method, repro.module, repro.reproduces) == ("module", "blocks.5", True), repro
    text = run.script("repro_block_tracer_dynamic").read_text()
    assert "DYNAMIC = {'input_0': [0]}" in text and "dynamic_axes=DYNAMIC," in text
    assert "torch.onnx.export(Call(module)," in text
