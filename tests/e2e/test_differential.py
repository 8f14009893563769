"""The differential check on a small subset (the whole built-in zoo is benchmarks/
test_differential.py): each harness cell against a direct torch.onnx.export in a fresh
plain process, same verdict and same graph. Real Ray, exporters and onnxruntime."""

from __future__ import annotations

from pathlib import Path

from benchmarks.differential import compare_run, markdown
from tests.conftest import FIXTURES, run_cli

ZOO = [
    FIXTURES / "tiny",
    FIXTURES / "fidelity" / "trailing_dict.py",
    FIXTURES / "fidelity" / "export_only.py",
]


def test_harness_cells_agree_with_direct_exports(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_cli(
        "run",
        *(a for z in ZOO for a in ("--zoo", str(z))),
        "--models",
        "tiny_mlp,tiny_cummax,trailing_dict,export_only_value",
        "--exporters",
        "dynamo,torchscript",
        "--opsets",
        "18",
        "--keep-onnx",
        "--out",
        str(out),
        "--no-report",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    rows = compare_run(out, zoo=ZOO)
    verdicts = {(r.record.model, r.record.exporter): r.plain.verdict for r in rows}
    assert len(rows) == 8
    assert all(r.agrees for r in rows), markdown(rows)
    # what the subset covers: a pass, an unsupported op, a trailing dict, an export-only branch
    assert verdicts[("tiny_mlp", "dynamo")] == "ok"
    assert verdicts[("tiny_cummax", "dynamo")] == "export"
    assert verdicts[("trailing_dict", "torchscript")] == "export"
    assert verdicts[("export_only_value", "dynamo")] == "numerics"
