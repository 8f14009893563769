"""Comparison on real runs: an injected slowdown and an injected unsupported op are
flagged, exactly those; two runs of the same versions (A/A) flag nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli

pytestmark = pytest.mark.e2e


def _run(out: Path, **env: str) -> Path:
    result = run_cli(
        "run",
        "--zoo",
        str(FIXTURES / "inject"),
        "--exporters",
        "dynamo",
        "--opsets",
        "18",
        "--out",
        str(out),
        "--no-report",
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("compare")
    return {
        "a": _run(root / "a"),
        "a2": _run(root / "a2"),
        "b": _run(root / "b", HARNESS_INJECT_SLOWDOWN="1", HARNESS_INJECT_UNSUPPORTED="1"),
    }


def _compare(baseline: Path, candidate: Path, out: Path) -> tuple[int, dict]:
    result = run_cli("compare", str(baseline), str(candidate), "--no-expected", "--out", str(out))
    return result.returncode, json.loads((out / "compare.json").read_text())


def test_injected_regressions_are_flagged_exactly(runs: dict[str, Path], tmp_path: Path) -> None:
    code, report = _compare(runs["a"], runs["b"], tmp_path)
    assert code == 1
    blocking = {
        (f["model"], f["family"]) for f in report["findings"] if f["severity"] == "blocking"
    }
    assert blocking == {("inj_slow", "ort_latency"), ("inj_op", "status")}
    flagged_models = {
        f["model"] for f in report["findings"] if f["severity"] in ("blocking", "warning")
    }
    assert not any(m.startswith("inj_steady") for m in flagged_models)
    messages = " ".join(f["message"] for f in report["findings"])
    assert "aten.cummax.default" in messages


def test_a_a_comparison_flags_nothing(runs: dict[str, Path], tmp_path: Path) -> None:
    code, report = _compare(runs["a"], runs["a2"], tmp_path)
    assert code == 0
    assert [f for f in report["findings"] if f["severity"] in ("blocking", "warning")] == []
