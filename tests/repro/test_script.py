"""A one-node repro is short enough to paste (issue 37): only the steps its failure needs,
under 40 lines of code besides its docstring, and it still reproduces in a fresh process;
a mismatch script keeps the cell's rule (eager's float64 noise floor included) and exits 0
where the value is right by it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.cell.shapes import Inputs
from harness.repro import module_script, script
from harness.repro.modules import Call
from harness.repro.oracle import Target, judge
from harness.repro.program import Program
from harness.store.records import OutputCheck
from harness.store.status import Stage

pytestmark = pytest.mark.slow  # real exports and a fresh process


def code_lines(text: str) -> int:
    """Lines of code: neither blank, nor a comment, nor the module's docstring."""
    body = ast.parse(text).body
    first = body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    start = first.end_lineno if docstring and first.end_lineno else 0
    lines = text.splitlines()[start:]
    return sum(1 for ln in lines if ln.strip() and not ln.strip().startswith("#"))


class Polygamma(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.polygamma(1, x)


def test_code_lines_leave_out_the_docstring_blanks_and_comments() -> None:
    assert code_lines('"""a\n\nb"""\n\nimport sys\n# why\n\nx = 1\n') == 2


def test_a_one_node_export_failure_is_under_40_lines_and_reproduces(tmp_path: Path) -> None:
    x = torch.rand(3) + 1.0
    program = Program(torch.export.export(Polygamma(), (x,)), [x])
    (node,) = [n for n in program.dag.order if "polygamma" in n]
    candidate = program.candidate([node], None)
    verdict = judge(candidate, Target("dynamo", 18, Stage.TRANSLATE), tmp_path / "judge")
    assert verdict.stage is Stage.TRANSLATE and verdict.signature
    target = Target("dynamo", 18, Stage.TRANSLATE, verdict.signature)
    about = script.About("cell", "run", 1, program.size, "a program")
    script.write(tmp_path, candidate, target, about)
    text = (tmp_path / script.SCRIPT).read_text()
    assert code_lines(text) < 40, text
    assert "onnxruntime" not in text.split('"""', 2)[2]  # no ONNX Runtime for an export failure
    assert "NORMALIZE" not in text and "re.sub" not in text
    out = subprocess.run(
        [sys.executable, str(tmp_path / script.SCRIPT)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 1, out.stderr[-2000:]
    assert "REPRODUCED at export" in out.stderr


class Log1p(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log1p(x)  # ONNX's Log(1 + x): a float32 1 + x loses a small x's digits


class Exp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.exp(x)


def _mismatch_script(
    folder: Path, model: torch.nn.Module, x: torch.Tensor, tolerance: tuple[float, float]
) -> tuple[str, OutputCheck]:
    """A one-node mismatch repro of `model` written into `folder`; its text and the cell's
    verdict on the node (the harness's own rule, in this process)."""
    program = Program(torch.export.export(model, (x,)), [x])
    (node,) = program.dag.order
    candidate = program.candidate([node], (node,))
    target = Target("dynamo", 18, Stage.NUMERICS, node=node, tolerance=tolerance)
    verdict = judge(candidate, target, folder / "judge")
    assert verdict.check is not None
    script.write(
        folder, candidate, target, script.About("cell", "run", 1, program.size, "a program")
    )
    return (folder / script.SCRIPT).read_text(), verdict.check


def _run(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(folder / script.SCRIPT)], capture_output=True, text=True, timeout=300
    )


def test_a_one_node_mismatch_is_under_40_lines_and_reproduces(tmp_path: Path) -> None:
    text, check = _mismatch_script(
        tmp_path, Log1p(), torch.tensor([1e-6, 2e-6, 3e-7, 5e-6]), (1e-4, 1e-9)
    )
    assert not check.ok, check  # the cell's rule: beyond rtol / atol and eager's noise floor
    assert code_lines(text) < 40, text
    assert "def mismatch(" in text and "want64 = Repro().double()" in text
    assert "step = " not in text and "onnx.checker" not in text  # no unused steps
    out = _run(tmp_path)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "REPRODUCED: node log1p differs" in out.stderr
    assert "AssertionError: node log1p: max_abs" in out.stderr


def test_a_mismatch_script_whose_node_is_right_exits_zero(tmp_path: Path) -> None:
    """Where Log(1 + x) keeps the digits (a graph that is fixed), the same script passes."""
    text, check = _mismatch_script(tmp_path, Log1p(), torch.tensor([0.5, 1.0, 2.0]), (1e-4, 1e-9))
    assert check.ok, check
    assert code_lines(text) < 40, text
    out = _run(tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "not reproduced: node log1p matches torch" in out.stdout


def test_a_value_within_eagers_own_float32_error_is_no_mismatch(tmp_path: Path) -> None:
    """ONNX Runtime's exp differs from torch's (no tolerance at all) but no more than 10x
    torch float32's own error against float64: the cell passes it, and so does the script."""
    torch.manual_seed(0)
    _text, check = _mismatch_script(tmp_path, Exp(), torch.randn(1000) * 10, (0.0, 0.0))
    assert check.ok and check.note and "passed by float64 gate" in check.note, check
    out = _run(tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "not reproduced: node exp matches torch" in out.stdout


def test_a_module_mismatch_script_judges_by_the_cells_rule_and_exits_zero_where_it_matches(
    tmp_path: Path,
) -> None:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    call = Call(Inputs((torch.rand(2, 4),), {}))
    target = Target("dynamo", 18, Stage.NUMERICS)
    module_script.write(
        tmp_path, module, call, target, module_script.Kept("c", "r", "0", 40, 20, 0)
    )
    text = (tmp_path / script.SCRIPT).read_text()
    assert "def mismatch(" in text and "want64" in text and "np.allclose" not in text
    out = _run(tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "not reproduced: outputs match eager" in out.stdout


def _picklable_hook(module, args, output):  # type: ignore[no-untyped-def]
    return output


def test_a_module_is_saved_without_the_hooks_pickle_cannot_take() -> None:
    """transformers installs closures on its layers to capture their outputs; torch.save
    cannot pickle them, so the module repro's module is saved without them (and keeps the
    hooks it can)."""
    import pickle

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    model[0].register_forward_hook(lambda module, args, output: output)
    model[1].register_forward_hook(_picklable_hook)
    saved = module_script._without_local_hooks(model)
    assert len(model[0]._forward_hooks) == 1  # the model itself keeps its hooks
    assert not saved[0]._forward_hooks and len(saved[1]._forward_hooks) == 1
    pickle.dumps(saved)
    with pytest.raises((AttributeError, pickle.PicklingError)):
        pickle.dumps(model)


def test_a_transformers_model_saved_without_its_hooks_installs_them_again() -> None:
    """A real BERT whose first forward installed transformers' output-capturing hooks: the
    saved module, loaded, captures its hidden states again (a backbone reads them)."""
    import io

    from transformers import BertConfig, BertModel

    config = BertConfig(
        hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32
    )
    model, ids = BertModel(config).eval(), torch.tensor([[1, 2, 3]])
    assert len(model(ids, output_hidden_states=True).hidden_states) == 3
    buffer = io.BytesIO()
    torch.save(module_script._without_local_hooks(model), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert len(loaded(ids, output_hidden_states=True).hidden_states) == 3
