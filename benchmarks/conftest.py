"""Shared pieces of the harness's own benchmarks (pytest-benchmark). Run them with
`make bench` (or `python -m pytest benchmarks -p no:cacheprovider --benchmark-json ...`);
each writes its figures to benchmarks/results/ as JSON and as a markdown table."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def harness(*args: str, timeout: float = 3600, env: dict[str, str] | None = None) -> float:
    """Run the real CLI (with `env` added to this environment); returns its wall time in
    seconds."""
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return time.perf_counter() - start


def timed_sweep(
    benchmark: Any, *args: str, timeout: float
) -> tuple[float, list[float], list[float]]:
    """One `harness` run timed once by pytest-benchmark: its wall time, and the machine's
    load average (1, 5, 15 min) before and after it (the machine is shared)."""
    load_before = [round(x, 2) for x in os.getloadavg()]
    wall = benchmark.pedantic(lambda: harness(*args, timeout=timeout), rounds=1, iterations=1)
    return wall, load_before, [round(x, 2) for x in os.getloadavg()]


def plain(script: str, *args: str, timeout: float = 900) -> dict[str, Any]:
    """Run one plain script in a fresh Python process; returns its JSON line."""
    result = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / script), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


class Figures:
    """Collects each benchmark's figures; written to results/summary.md at the end. A run
    of some benchmarks replaces their sections and keeps the others' latest figures."""

    def __init__(self) -> None:
        saved = RESULTS / "figures.json"
        self.sections: dict[str, list[str]] = (
            json.loads(saved.read_text()) if saved.exists() else {}
        )

    def add(self, section: str, lines: list[str]) -> None:
        self.sections[section] = lines

    def write(self) -> None:
        RESULTS.mkdir(parents=True, exist_ok=True)
        text = ["# Harness benchmarks", ""]
        for name, lines in self.sections.items():
            text += [f"## {name}", "", *lines, ""]
        (RESULTS / "summary.md").write_text("\n".join(text))
        (RESULTS / "figures.json").write_text(json.dumps(self.sections, indent=2))


@pytest.fixture(scope="session")
def figures() -> Iterator[Figures]:
    f = Figures()
    yield f
    f.write()
