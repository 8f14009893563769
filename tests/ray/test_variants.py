"""Variants: the same cells under another version of a package, in a Ray runtime_env (what
only Ray does; `--local` refuses `--variant`)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.store import rundir as store
from harness.store.status import Status
from tests.conftest import FIXTURES, REPO, installed_version, run_cli


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


# One runtime_env for both packages a variant is used for (each costs a Ray worker's virtualenv
# and pip's install, a minute or two on 2 cores): an older transformers and an older
# onnxscript (the bisect and channel tiers move packages the same way).
VARIANT = ("transformers==5.22.2", "onnxscript==0.6.2")


def test_a_variant_runs_its_cells_with_other_package_versions_in_its_own_runtime_env(
    tmp_path: Path,
) -> None:
    """`--variant old=transformers==X,onnxscript==Y` runs the same cells with those versions
    in a Ray runtime_env; records say which variant, the manifest which versions, compare
    names them, and the variant's clone of the virtualenv goes with the Ray instance."""
    pytest.importorskip("transformers")
    for spec in VARIANT:
        if problem := _index_reachable(spec):
            pytest.skip(f"no package index reachable for {spec}: {problem}")
    out = tmp_path / "variant"
    clones_before = set(_variant_clones())
    result = run_cli(
        "run", "--suite", "transformers", "--models", "hf.bert,tiny_mlp",
        "--zoo", str(FIXTURES / "tiny"), "--exporters", "dynamo", "--opsets", "18",
        "--variant", f"old={','.join(VARIANT)}", "--out", str(out),
        "--timeout", "600", "--no-report", ray=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = {(r.model, r.variant): r for r in store.read_records(out)}
    assert set(records) == {(m, v) for m in ("hf.bert", "tiny_mlp") for v in ("base", "old")}
    outcome = {k: (str(r.status), r.error_signature) for k, r in records.items()}
    assert all(r.status is Status.OK for r in records.values()), outcome
    versions = store.read_manifest(out).versions
    for spec in VARIANT:
        name, version = spec.split("==")
        assert versions["old"][name] == version
        assert versions["base"][name] == installed_version(name) != version
    compared = run_cli("compare", str(out), "--variants", "old,base", "--no-expected")
    assert compared.returncode in (0, 1), compared.stderr[-2000:]
    assert f"transformers {versions['old']['transformers']}" in compared.stdout
    # The variant's clone of the virtualenv (~2 GB) went with the local Ray instance.
    assert set(_variant_clones()) <= clones_before


def _variant_clones() -> list[Path]:
    """The pip environments Ray's local sessions hold (Ray's default temp folder)."""
    return list(Path(tempfile.gettempdir(), "ray").glob("session_*/runtime_resources/pip/*"))
