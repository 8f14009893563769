"""The ORT-optimisation axis (issue 36): each level's graph is judged against eager like the
plain cell, with the fused ops that appeared and the optimizers that changed it; where an
optimised graph fails and the graph as exported passes, the search names the optimizer.
Real exports, real onnxruntime and onnxruntime.transformers; the fusion's verdict is checked
against a plain script in a fresh process (tests/cell/plain_ort_opt.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.cell import ort_opt
from harness.cell.ort import Optimisation
from harness.cell.worker import run_cell
from harness.store.records import Cell, CellTask, Dtype, OrtOpt, Record
from harness.store.status import Status

MODELS = Path(__file__).resolve().parents[1] / "zoo_fixtures" / "precision" / "models.py"
PLAIN = Path(__file__).resolve().parent / "plain_ort_opt.py"


def _run(tmp_path: Path, model: str, level: str, dtype: str = "float32") -> Record:
    cell = Cell(model, "dynamo", 18, dtype=Dtype(dtype), ort_opt=OrtOpt(level))
    return run_cell(CellTask(cell, str(MODELS), "t", str(tmp_path)))


@pytest.mark.slow
def test_the_search_names_the_fusion_that_changes_float16_numbers(tmp_path: Path) -> None:
    fused = _run(tmp_path, "gelu_block", "fusions", "float16")
    plain = json.loads(
        subprocess.run(
            [sys.executable, str(PLAIN), str(MODELS), "gelu_block", "enable_skip_layer_norm"],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout.splitlines()[-1]
    )
    assert plain["all"] > 0.01 >= plain["enable_skip_layer_norm"]  # the plain verdicts
    assert fused.status is Status.NUMERICS_MISMATCH
    (check,) = fused.numerics.checks or []
    assert check.mismatch_fraction == pytest.approx(plain["all"])
    assert fused.ort.broken_by == "enable_skip_layer_norm"
    assert fused.ort.fused_ops == {"BiasGelu": 1, "SkipLayerNormalization": 1}
    assert fused.minimal_repro is None
    unfused = _run(tmp_path, "gelu_block", "none", "float16")
    assert unfused.status is Status.OK and unfused.ort.fused_ops == {}
    assert unfused.ort.runtime is not None
    assert unfused.ort.runtime.session_options["graph_optimization_level"] == "none"


@pytest.mark.slow
def test_all_judges_the_written_graph_and_names_what_changed_it(tmp_path: Path) -> None:
    record = _run(tmp_path, "gelu_block", "all")
    assert record.status is Status.OK, record.error_message
    assert record.ort.fused_ops is not None and "SkipLayerNormalization" in record.ort.fused_ops
    assert record.ort.optimizers is not None
    assert {"MatMulAddFusion", "SkipLayerNormFusion"} <= set(record.ort.optimizers)
    assert record.ort.broken_by is None and record.cell.cell_id.endswith("--ort-all")


def _exported(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.LayerNorm(16)).eval()
    path = tmp_path / "m.onnx"
    x = torch.randn(2, 4, 16)  # 3-D: MatMul and Add, which ORT fuses
    torch.onnx.export(model, (x,), path, dynamo=False, opset_version=18)
    return path


def test_changed_by_reads_the_transformers_ort_ran_and_disabling_one_removes_it(
    tmp_path: Path,
) -> None:
    path = _exported(tmp_path)
    changed = ort_opt.changed_by(path, Optimisation("all"))
    assert "MatMulAddFusion" in changed
    without = ort_opt.changed_by(path, Optimisation("all", disabled=("MatMulAddFusion",)))
    assert "MatMulAddFusion" not in without
    assert ort_opt.changed_by(path, Optimisation("none")) == []


def test_the_search_tries_each_transformer_that_changed_the_graph(tmp_path: Path) -> None:
    """The judgement is a stand-in here (no ORT transformer breaks numbers on this graph on
    the CPU provider): a graph 'passes' where MatMulAddFusion did not run. The sessions and
    their transformer logs are ORT's own."""
    path = _exported(tmp_path)
    tried: list[tuple[str, ...]] = []

    def passes(p: Path, optimisation: Optimisation) -> bool:
        tried.append(optimisation.disabled)
        return "MatMulAddFusion" not in ort_opt.changed_by(p, optimisation)

    assert ort_opt.culprit(OrtOpt.ALL, path, passes) == "MatMulAddFusion"
    assert tried[0] == () and tried[-1] == ("MatMulAddFusion",)
    assert ort_opt.culprit(OrtOpt.NONE, path, passes) is None
    assert ort_opt.culprit(OrtOpt.ALL, path, lambda p, o: False) is None  # not ORT's doing
