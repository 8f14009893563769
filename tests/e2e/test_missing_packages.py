"""Exporters whose package is not installed (issue 49): their cells are skipped with the
reason and the install command, never a harness error (every cell of `--exporters
transformers` without transformers once was, cut to `task raised: concurrent.futures.
process._RemoteTraceback:`).

The environment is this one with the packages made unimportable in every process of the
run: a `sitecustomize` on PYTHONPATH installs an import hook that refuses `transformers`,
`onnxruntime_genai` and `mobius`, so the driver, the zygotes (spawned: they start from
PYTHONPATH too), the cells' children and any builder subprocess all lack them, as an
environment without them does. A second environment with torch but without transformers
would cost a torch install per test run for the same imports failing the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from harness.store import rundir
from harness.store.status import Status

REPO = Path(__file__).resolve().parents[2]
HIDDEN = ("transformers", "onnxruntime_genai", "mobius")
HOOK = f"""
import sys

class _Hidden:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HIDDEN!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Hidden())
"""


def _without_packages(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    hook = tmp / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    env = {**os.environ, "PYTHONPATH": str(hook), "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip


def test_exporters_not_installed_are_skipped_with_the_install_command(tmp_path: Path) -> None:
    probe = _without_packages(tmp_path, "list", "--json")
    assert probe.returncode == 0, probe.stderr[-2000:]
    names = {e["name"] for e in json.loads(probe.stdout)["exporters"]}
    assert {"transformers", "genai-builder", "mobius"} <= names
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-c", "import transformers"],
        env={**os.environ, "PYTHONPATH": str(tmp_path / "hook")}, capture_output=True, text=True,
    )  # fmt: skip
    assert "No module named 'transformers'" in done.stderr  # the hook holds in a new process
    result = _without_packages(
        tmp_path, "run", "--local", "--suite", "smoke", "--opsets", "18",
        "--exporters", "transformers,genai-builder,mobius", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    reasons = {}
    for r in rundir.read_records(out):
        assert r.status is Status.SKIPPED, (r.cell.label(), r.status, r.error_message)
        reasons[r.exporter] = r.reason
    assert reasons == {
        "transformers": "transformers is not installed: pip install 'transformers>=5.13'",
        "genai-builder": "the genai builder is not installed: pip install 'onnxruntime-genai>=0.18'",
        "mobius": "mobius is not installed: pip install 'mobius-onnx>=0.1'",
    }
