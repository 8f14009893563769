"""Comparison on real runs: an injected slowdown and an injected unsupported op are
flagged, exactly those; two runs of the same versions (A/A) flag nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.store.runs import read_run
from tests.conftest import FIXTURES, run_cli


def _run(out: Path, *more: str, **env: str) -> Path:
    result = run_cli(
        "run",
        *more,
        "--zoo",
        str(FIXTURES / "inject"),
        "--exporters",
        "dynamo",
        "--opsets",
        "18",
        "--out",
        str(out),
        "--no-report",
        env={"HARNESS_SKIP_WARM_UP": "0", **env},  # timings compared: as a user's run
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three runs: `a` and `a2` of the same versions (A/A), `b` with both injections; `a` and
    `b` keep their graphs in one store, so an unchanged graph is stored once."""
    root = tmp_path_factory.mktemp("compare")
    graphs = ("--keep-graphs", str(root / "graphs"))
    return {
        "a": _run(root / "a", *graphs),
        "a2": _run(root / "a2"),
        "b": _run(root / "b", *graphs, HARNESS_INJECT_SLOWDOWN="1", HARNESS_INJECT_UNSUPPORTED="1"),
    }


def _compare(baseline: Path, candidate: Path, out: Path, *more: str) -> tuple[int, dict]:
    result = run_cli(
        "compare", str(baseline), str(candidate), "--no-expected", "--out", str(out), *more
    )
    return result.returncode, json.loads((out / "compare.json").read_text())


def test_injected_regressions_are_flagged_exactly(runs: dict[str, Path], tmp_path: Path) -> None:
    """Judged from the two runs' own samples (`--no-remeasure`)."""
    code, report = _compare(runs["a"], runs["b"], tmp_path, "--no-remeasure")
    assert code == 1
    blocking = {
        (f["model"], f["family"]) for f in report["findings"] if f["severity"] == "blocking"
    }
    assert blocking == {("inj_slow", "ort_latency"), ("inj_op", "status")}
    flagged_models = {  # run-wide findings (a shift, the exporter's cold start) name no model
        f["model"] for f in report["findings"] if f["severity"] in ("blocking", "warning")
    } - {None}
    assert not any(m.startswith("inj_steady") for m in flagged_models)
    messages = " ".join(f["message"] for f in report["findings"])
    assert "aten.cummax.default" in messages


def test_a_a_comparison_flags_nothing(runs: dict[str, Path], tmp_path: Path) -> None:
    """No cell alerts. The exporter's cold start is one sample per run, which the other
    tests running beside it move (x1.28 seen for two runs a minute apart): with too few runs
    for a noise estimate it may warn, never block."""
    code, report = _compare(runs["a"], runs["a2"], tmp_path)
    assert code == 0
    alerts = [f for f in report["findings"] if f["severity"] in ("blocking", "warning")]
    assert [f for f in alerts if not f["family"].startswith("cold_start_")] == []
    assert all(f["severity"] == "warning" and f["model"] is None for f in alerts)


def test_a_changed_graph_is_re_measured_in_pairs_and_blocks(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """inj_slow's graph does 3x the work: its two kept graphs are timed together and that
    verdict blocks; inj_op's export fails (a status finding), the other cells have the same
    graph and never alert."""
    code, report = _compare(runs["a"], runs["b"], tmp_path)
    assert code == 1
    ort = [f for f in report["findings"] if f["family"] == "ort_latency"]
    assert [(f["model"], f["kind"], f["severity"]) for f in ort] == [
        ("inj_slow", "paired_regressed", "blocking")
    ]
    assert "interleaved" in ort[0]["evidence"] and ort[0]["ratio"] > 1.5
    assert any("1 changed cells re-measured in interleaved pairs" in n for n in report["notes"])
    same = report["counts"]["not_compared"]
    assert same["ort_latency: same graph and runtime (noise only, never an alert)"] == 5
    stored = {p.parent.name for p in (runs["a"].parent / "graphs").glob("*/*/model.onnx")}
    kept = {r.export.graph_fingerprint for k in ("a", "b") for r in read_run(runs[k]).records}
    assert stored == kept - {None}  # one entry per graph, shared by the two runs
    before = {r.model: r.export.graph_fingerprint for r in read_run(runs["a"]).records}
    after = {r.model: r.export.graph_fingerprint for r in read_run(runs["b"]).records}
    assert {m for m in before if before[m] != after[m]} == {"inj_slow", "inj_op"}


def test_no_remeasure_judges_the_separate_runs(runs: dict[str, Path], tmp_path: Path) -> None:
    _code, report = _compare(runs["a"], runs["b"], tmp_path, "--no-remeasure")
    kinds = {f["kind"] for f in report["findings"]}
    assert not kinds & {"paired_regressed", "paired_improved", "paired_unknown"}
    assert not any("re-measured" in n for n in report["notes"])


def test_graph_identical_runs_never_alert_on_latency(runs: dict[str, Path], tmp_path: Path) -> None:
    """A/A: run a2 (no graphs kept) against run a: every fingerprint is the same."""
    code, report = _compare(runs["a2"], runs["a"], tmp_path)
    assert code == 0
    assert [f for f in report["findings"] if f["family"] == "ort_latency"] == []
