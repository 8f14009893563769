"""Variants: the same cells under another version of a package, in a Ray runtime_env (what
only Ray does; `--local` refuses `--variant`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.store import rundir as store
from harness.store.status import Status
from tests.conftest import REPO, installed_version, run_cli


def _index_reachable(spec: str) -> str | None:
    """None where pip can fetch `spec`, else why not."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d",
             str(REPO / ".cache" / "pip-probe"), spec],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "pip download timed out"
    return None if result.returncode == 0 else result.stderr.strip().splitlines()[-1][:200]


VARIANT_TRANSFORMERS = "transformers==5.22.2"


def test_compare_across_transformers_versions_with_a_variant(tmp_path: Path) -> None:
    """`--variant old=transformers==X` runs the same cells with another transformers in a
    Ray runtime_env; records say which variant, and the manifest which versions."""
    pytest.importorskip("transformers")
    problem = _index_reachable(VARIANT_TRANSFORMERS)
    if problem:
        pytest.skip(f"no package index reachable for {VARIANT_TRANSFORMERS}: {problem}")
    out = tmp_path / "variant"
    result = run_cli(
        "run", "--suite", "transformers", "--models", "hf.bert", "--exporters", "dynamo",
        "--opsets", "18", "--variant", f"old={VARIANT_TRANSFORMERS}", "--out", str(out),
        "--timeout", "600", "--no-report", ray=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = {r.variant: r for r in store.read_records(out)}
    assert set(records) == {"base", "old"}
    outcome = {v: (str(r.status), r.error_signature) for v, r in records.items()}
    assert all(r.status is Status.OK for r in records.values()), outcome
    versions = store.read_manifest(out).versions
    assert versions["old"]["transformers"] == VARIANT_TRANSFORMERS.split("==")[1]
    assert versions["base"]["transformers"] == installed_version("transformers")
    compared = run_cli("compare", str(out), "--variants", "old,base", "--no-expected")
    assert compared.returncode in (0, 1), compared.stderr[-2000:]
    assert f"transformers {versions['old']['transformers']}" in compared.stdout
