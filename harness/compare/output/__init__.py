"""Projections of a `Comparison`, one module per format: markdown, JSON, JUnit XML and
pytest-benchmark JSON. Each is a pure function of the comparison (or of the candidate run);
only `write_outputs` and `append_step_summary` touch files."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from harness.compare.comparison import Comparison
from harness.compare.output.benchmark import to_pytest_benchmark
from harness.compare.output.json_report import to_json
from harness.compare.output.junit import to_junit
from harness.compare.output.markdown import to_markdown
from harness.store.files import write_inside

OUTPUT_FILES = ("compare.md", "compare.json", "junit.xml", "benchmark.json")


def write_outputs(c: Comparison, out_dir: Path) -> list[Path]:
    """Write compare.md, compare.json, junit.xml and benchmark.json into `out_dir`, each
    beside itself and replaced into place (never through a symlink: harness.store.files)."""
    texts = [
        to_markdown(c),
        json.dumps(to_json(c), indent=2, allow_nan=False) + "\n",
        to_junit(c),
        json.dumps(to_pytest_benchmark(c.candidate), indent=2, allow_nan=False) + "\n",
    ]
    return [write_inside(out_dir, n, t) for n, t in zip(OUTPUT_FILES, texts, strict=True)]


def append_step_summary(markdown: str, env: Mapping[str, str] = os.environ) -> Path | None:
    """Append to `$GITHUB_STEP_SUMMARY` when set (GitHub Actions renders it on the run page)."""
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a") as f:
        f.write(markdown + "\n")
    return Path(target)
