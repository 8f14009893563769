"""A one-node repro is short enough to paste (issue 37): only the steps its failure needs,
under 40 lines of code besides its docstring, and it still reproduces in a fresh process."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.cell.repro import script
from harness.cell.repro.oracle import Target, judge
from harness.cell.repro.program import Program
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
