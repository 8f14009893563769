"""This checkout against another one (an older commit with its own virtualenv), run
interleaved on the same cells: A B A B ..., so that both sides see the same machine.

    HARNESS_AB_BASE=/path/to/old/checkout python -m pytest benchmarks/test_interleaved_ab.py

The cells: 60 models of the transformers suite drawn with a fixed seed from the suite
(static, @18, both exporters: 120 cells), or HARNESS_AB_MODELS. Reports each round's wall
times and their ratio (this checkout / base), and whether every cell has the same verdict
on both sides in every round (status, stage, error type: `verdict_changes`)."""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from benchmarks.conftest import REPO, Figures
from benchmarks.test_transformers_sweep import verdict_changes
from harness.plan.build import RunOptions, make_plan
from harness.store import rundir

ROUNDS = 2
SAMPLE = 60
SEED = 11


def test_interleaved_against_a_base_checkout(figures: Figures, tmp_path: Path) -> None:
    base = os.environ.get("HARNESS_AB_BASE")
    if not base:
        pytest.skip("set HARNESS_AB_BASE to another checkout with its own .venv")
    models = os.environ.get("HARNESS_AB_MODELS") or ",".join(_sample())
    walls: dict[str, list[float]] = {"base": [], "this": []}
    changed: list[str] = []
    for round_ in range(ROUNDS):
        records = {}
        for side, checkout in (("base", Path(base)), ("this", REPO)):
            out = tmp_path / f"{side}-{round_}"
            walls[side].append(_run(checkout, models, out))
            records[side] = rundir.read_records(out)
        changed += verdict_changes(records["base"], records["this"])
    cells = len(records["base"])
    ratios = [t / b for t, b in zip(walls["this"], walls["base"], strict=True)]
    lines = [
        f"{cells} cells; base {base}",
        *(
            f"round {i + 1}: base {b:.1f} s, this {t:.1f} s, ratio {t / b:.2f}"
            for i, (b, t) in enumerate(zip(walls["base"], walls["this"], strict=True))
        ),
        f"median ratio {statistics.median(ratios):.2f}; verdicts that differ in any round:"
        f" {changed or 'none'}",
    ]
    figures.add("Interleaved against a base checkout (transformers sample)", lines)
    assert not changed


def _sample() -> list[str]:
    plan = make_plan(RunOptions(suite="transformers"))  # nothing is written
    return sorted(random.Random(SEED).sample(sorted(plan.specs), SAMPLE))


def _run(checkout: Path, models: str, out: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [str(checkout / ".venv" / "bin" / "harness"), "run", "--suite", "transformers",
         "--models", models, "--opsets", "18", "--timeout", "300", "--out", str(out),
         "--no-report"],
        cwd=checkout, check=True, capture_output=True, timeout=3600,
        env={**os.environ, "HARNESS_REPRO_BOUND": "0"},
    )  # fmt: skip
    return time.perf_counter() - start
