"""Paired verdicts in a comparison: which cells are re-measured, and how a verdict replaces
the separately-timed one (no Ray, no onnxruntime: the results are made by hand)."""

from __future__ import annotations

import math
import random
from pathlib import Path

from harness.compare import BLOCKING, IMPROVEMENT, INFO, WARNING, Options, compare_runs
from harness.compare.paired import pair_tasks
from harness.store.graphs import INPUTS, MODEL, entry_dir
from harness.store.paired import PairResult
from harness.store.records import Record
from harness.store.runs import Run
from tests.fixtures_compare import changed, record, run, samples

RUNTIME = {"onnxruntime": "1.32.0", "providers": ["CPUExecutionProvider"], "session_options": {}}


def _cell(model: str, ort: list[float], fp: str, **artifacts: str) -> Record:
    return changed(
        record(model, ort=ort), graph_fingerprint=fp, ort_runtime=RUNTIME, artifacts=artifacts
    )


def _result(key, verdict: str, ratio: float, base_ms: float = 1.0, **more) -> PairResult:
    e = math.log(ratio)
    return PairResult(
        key,
        (e,) * 40,
        (base_ms,) * 80,
        (base_ms * ratio,) * 80,
        verdict,
        e,
        e - 0.01,
        e + 0.01,
        1e-6,
        2.0,
        RUNTIME,
        **more,
    )


def _pair(ratio_between_runs: float) -> tuple[Run, Run]:
    rng = random.Random(5)
    base = _cell("m", samples(rng, 1.0, 0.02), "a" * 64)
    cand = _cell("m", samples(rng, ratio_between_runs, 0.02), "b" * 64)
    return run("A", [base]), run("B", [cand])


def test_a_slower_paired_verdict_blocks_where_the_separate_runs_saw_nothing() -> None:
    base, cand = _pair(1.0)
    key = cand.records[0].cell.key
    c = compare_runs(base, cand, Options(paired={key: _result(key, "slower", 1.10)}))
    (f,) = [f for f in c.findings if f.metric == "ort_latency"]
    assert (f.kind, f.severity) == ("paired_regressed", BLOCKING)
    assert "interleaved" in (f.evidence or "") and f.ratio == f.ratio and abs(f.ratio - 1.1) < 1e-9


def test_a_paired_finding_names_what_ran_beside_the_pairs_timing() -> None:
    base, cand = _pair(1.0)
    key = cand.records[0].cell.key
    beside = ("real.gpt2 torchscript@18: build", "real.opt_125m dynamo@18: reference")
    timed = _result(key, "slower", 1.10, timed_beside=beside)
    (f,) = [f for f in compare_runs(base, cand, Options(paired={key: timed})).findings]
    assert (f.evidence or "").endswith(f"; beside its timing: pair ({', '.join(beside)})")
    alone = _result(key, "slower", 1.10)
    (f,) = [f for f in compare_runs(base, cand, Options(paired={key: alone})).findings]
    assert "beside" not in (f.evidence or "")


def test_a_paired_slowdown_of_a_tiny_model_blocks_under_the_absolute_floor() -> None:
    base, cand = _pair(1.0)
    key = cand.records[0].cell.key
    tiny = _result(key, "slower", 1.10, base_ms=0.13)  # +0.013 ms, under latency_abs_ms
    c = compare_runs(base, cand, Options(paired={key: tiny}))
    (f,) = [f for f in c.findings if f.metric == "ort_latency"]
    assert (f.kind, f.severity) == ("paired_regressed", BLOCKING)
    assert f.candidate - f.baseline < Options().thresholds.latency_abs_ms


def test_a_paired_verdict_replaces_the_separate_runs_one() -> None:
    base, cand = _pair(2.0)  # the separate runs say x2 (a busy machine)
    key = cand.records[0].cell.key
    assert [f.kind for f in compare_runs(base, cand).findings] == ["metric_regressed"]
    same = compare_runs(base, cand, Options(paired={key: _result(key, "same", 1.0)}))
    assert [f for f in same.findings if f.metric == "ort_latency"] == []
    assert same.not_compared["ort_latency: graph changed, same speed timed together"] == 1


def test_small_slowdowns_warn_faster_improves_unknown_informs() -> None:
    base, cand = _pair(1.0)
    key = cand.records[0].cell.key
    expected = {
        ("slower", 1.04): WARNING,
        ("faster", 0.8): IMPROVEMENT,
        ("unknown", 1.02): INFO,
        ("unknown", 1.04): WARNING,
    }
    for (verdict, ratio), severity in expected.items():
        c = compare_runs(base, cand, Options(paired={key: _result(key, verdict, ratio)}))
        assert [f.severity for f in c.findings if f.metric == "ort_latency"] == [severity]


def test_a_failed_re_measurement_leaves_the_separate_verdict() -> None:
    base, cand = _pair(2.0)
    key = cand.records[0].cell.key
    failed = PairResult(key, error="RuntimeError: gone")
    c = compare_runs(base, cand, Options(paired={key: failed}))
    assert [f.kind for f in c.findings] == ["metric_regressed"]
    assert c.not_compared["ort_latency: paired re-measurement failed"] == 1


def _stored(store: Path, fp: str) -> str:
    entry = entry_dir(store, fp)
    entry.mkdir(parents=True)
    (entry / MODEL).write_bytes(b"onnx")
    (entry / INPUTS).write_bytes(b"npz")
    return f"../graphs/{fp[:2]}/{fp}/{MODEL}"


def test_only_changed_graphs_kept_on_both_sides_are_re_measured(tmp_path: Path) -> None:
    rng = random.Random(6)
    store = tmp_path / "graphs"
    lat = lambda: samples(rng, 1.0, 0.02)  # noqa: E731
    base = [
        _cell("same", lat(), "1" * 64, graph=_stored(store, "1" * 64)),
        _cell("changed", lat(), "2" * 64, graph=_stored(store, "2" * 64)),
        _cell("unkept", lat(), "4" * 64),
    ]
    cand = [
        _cell("same", lat(), "1" * 64, graph=f"../graphs/11/{'1' * 64}/{MODEL}"),
        _cell("changed", lat(), "3" * 64, graph=_stored(store, "3" * 64)),
        _cell("unkept", lat(), "5" * 64, graph=_stored(store, "5" * 64)),
    ]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Run(run("A", base).manifest, tuple(base), str(tmp_path / "a"))
    b = Run(run("B", cand).manifest, tuple(cand), str(tmp_path / "b"))
    tasks, missing = pair_tasks(a, b, threads=2)
    assert [t.key[0] for t in tasks] == ["changed"] and missing == 1
    assert tasks[0].threads == 2 and tasks[0].baseline_model.endswith(f"{'2' * 64}/{MODEL}")


def test_most_re_measured_cells_slower_is_a_shift_finding() -> None:
    rng = random.Random(8)
    base = [_cell(f"c{i}", samples(rng, 1.0, 0.02), f"{i:064d}") for i in range(6)]
    cand = [_cell(f"c{i}", samples(rng, 1.0, 0.02), f"{i + 50:064d}") for i in range(6)]
    paired = {r.cell.key: _result(r.cell.key, "slower", 1.1) for r in cand}
    c = compare_runs(run("A", base), run("B", cand), Options(paired=paired))
    shifts = [f for f in c.findings if f.kind == "run_shift"]
    assert len(shifts) == 1 and "6 re-measured cells" in shifts[0].message
    assert len(c.blocking) == 6
