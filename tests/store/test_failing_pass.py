"""Where a failing record went wrong, as a bisection names it (harness.store.diagnosis
.failing_pass): the deepest exporter pass of its traceback, read from its error artifact."""

from __future__ import annotations

from pathlib import Path

from harness.store.diagnosis import failing_pass
from tests.fixtures_compare import record

TRACEBACK = """Traceback (most recent call last):
  File "/env/lib/python3.11/site-packages/torch/onnx/_internal/exporter/_core.py", line 1, in export
  File "/env/lib/python3.11/site-packages/torch/onnx/_internal/fx/passes/type_promotion.py", line 1700, in run_node
  File "/env/lib/python3.11/site-packages/torch/onnx/_internal/fx/passes/type_promotion.py", line 1500, in find_compatible_op_overload
RuntimeError: Cannot find a compatible OpOverload for aten.sub
"""


def test_the_deepest_exporter_pass_of_the_traceback_is_named(tmp_path: Path) -> None:
    failed = record(status="export_failed", stage="translate", error=RuntimeError("no aten.sub"))
    (tmp_path / "artifacts").mkdir()
    (tmp_path / "artifacts" / "error.txt").write_text(TRACEBACK)
    failed = failed.with_changes(artifacts={"error": "artifacts/error.txt"})
    assert failing_pass(failed, tmp_path) == "type_promotion (find_compatible_op_overload)"
    assert failing_pass(failed, tmp_path / "elsewhere") is None  # no traceback to read
    assert failing_pass(record()) is None  # an ok cell went nowhere wrong
