"""What a fresh process pays to import before its first cell: every zygote, Ray worker,
`harness` command and repro script starts with these imports, and the test suite starts
hundreds of them (benchmarks/README.md, "Imports"). Each figure is the CPU time of the
imports alone, in a fresh interpreter, the median of ROUNDS with the spread: CPU time,
not wall time, so that the machine's other work does not stretch it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.conftest import REPO, Figures
from harness import stats

ROUNDS = 5

# The interpreter's own start and numpy (which torch, onnx and onnxruntime import) are paid
# first, outside the clock.
PROBE = """
import json, sys, time
import numpy
start = time.process_time()
for name in sys.argv[1].split(","):
    __import__(name)
print(json.dumps(round(time.process_time() - start, 4)))
"""

IMPORTS = {
    "a zygote's imports before its first cell": (
        "torch,harness.runtime.zygote,harness.runtime.worker,onnx,onnxscript,onnxruntime"
    ),
    "ml_dtypes (onnx imports it)": "ml_dtypes",
    "harness.stats (every cell and command)": "harness.stats",
}


def import_cpu_s(modules: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, modules],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return float(json.loads(out.stdout))


@pytest.mark.parametrize("what", list(IMPORTS))
def test_import_cpu(benchmark, figures: Figures, what: str) -> None:  # type: ignore[no-untyped-def]
    rounds = benchmark.pedantic(
        lambda: [import_cpu_s(IMPORTS[what]) for _ in range(ROUNDS)], rounds=1, iterations=1
    )
    median = stats.median(rounds)
    benchmark.extra_info.update(cpu_s=rounds)
    figures.add(
        f"Import CPU: {what}",
        [f"{median:.3f} CPU-s (median of {ROUNDS}; {min(rounds):.3f}-{max(rounds):.3f})"],
    )
    assert all(r >= 0 for r in rounds) and median > 0
