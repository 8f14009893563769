"""Findings on synthetic runs: every deterministic kind and the noisy judgement."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
from scipy.stats import mannwhitneyu

from harness.compare import (
    BLOCKING,
    IMPROVEMENT,
    INFO,
    WARNING,
    CompareError,
    Options,
    Thresholds,
    check_comparable,
    compare_runs,
)
from harness.store.details import WorkerInfo
from harness.store.manifest import Manifest
from harness.store.records import Dtype
from harness.store.runs import Run
from harness.store.status import Stage, Status
from tests.fixtures_compare import changed, check, kinds, measurements, one, record, run, samples

# -- deterministic findings --------------------------------------------------------------------


def test_identical_runs_have_no_findings():
    recs = [
        record("a", ort=[1.0, 1.1, 1.2]),
        record("b", status="export_failed", stage="capture", error=RuntimeError("x")),
    ]
    c = compare_runs(run("A", recs), run("B", recs))
    assert c.findings == () and c.unchanged == 2 and c.verdict == "pass"


def test_ok_to_failure_is_blocking_with_stage_and_error():
    failed = record(
        status="export_failed",
        stage="translate",
        error=NotImplementedError("aten.cummax.default has no lowering"),
    )
    f = one(compare_runs(run("A", [record()]), run("B", [failed])), "status_regressed")
    assert f.severity == BLOCKING
    assert "ok -> export_failed at translate" in f.message and "aten.cummax.default" in f.message


def test_fixed_cell_is_an_improvement():
    failed = record(status="ort_load_failed", stage="ort_session", error=RuntimeError("bad model"))
    f = one(compare_runs(run("A", [failed]), run("B", [record()])), "status_fixed")
    assert f.severity == IMPROVEMENT and f.baseline == "ort_load_failed"


def test_failure_getting_worse_is_a_warning():
    numerics = record(status="numerics_mismatch", stage="numerics", error=AssertionError("off"))
    export = record(status="export_failed", stage="capture", error=RuntimeError("boom"))
    f = one(compare_runs(run("A", [numerics]), run("B", [export])), "status_changed")
    assert f.severity == WARNING


def test_status_order():
    assert Status.OK.rank == Status.XFAIL.rank == Status.SKIPPED.rank == Status.XPASS.rank == 0
    assert (
        Status.NUMERICS_MISMATCH.rank
        < Status.ORT_RUN_FAILED.rank
        < Status.EXPORT_FAILED.rank
        < Status.TIMEOUT.rank
        < Status.HARNESS_ERROR.rank
    )


def test_rank_zero_is_exactly_the_passing_statuses():
    """The ratchet expects a cell without a row to pass: rank 0, the best there is."""
    assert {s for s in Status if s.rank == 0} == {s for s in Status if s.passing}


def test_opset_actual_change():
    f = one(
        compare_runs(run("A", [record(opset_actual=18)]), run("B", [record(opset_actual=20)])),
        "opset_changed",
    )
    assert (f.baseline, f.candidate, f.severity) == (18, 20, WARNING)


def test_opset_actual_missing_on_one_side_is_no_finding():
    assert compare_runs(run("A", [record(opset_actual=18)]), run("B", [record()])).findings == ()


def test_numerics_ok_flip_names_the_output():
    a = record(numerics=[check("logits"), check("hidden")])
    b = record(numerics=[check("logits"), check("hidden", max_abs=0.5, ok=False)])
    f = one(compare_runs(run("A", [a]), run("B", [b])), "numerics_flipped")
    assert f.severity == WARNING and "hidden" in f.message  # the status change blocks


def test_numerics_error_grown_tenfold_within_tolerance_is_a_warning():
    a, b = record(numerics=[check(max_abs=1e-7)]), record(numerics=[check(max_abs=2e-6)])
    f = one(compare_runs(run("A", [a]), run("B", [b])), "numerics_error_grew")
    assert f.severity == WARNING and f.ratio == pytest.approx(20)
    nine_fold = record(numerics=[check(max_abs=9e-7)])
    assert compare_runs(run("A", [a]), run("B", [nine_fold])).findings == ()


def test_new_unsupported_op_is_named():
    a = record(
        status="export_failed",
        stage="translate",
        unsupported_ops=["aten.foo.default"],
        error=RuntimeError("x"),
    )
    b = record(
        status="export_failed",
        stage="translate",
        unsupported_ops=["aten.foo.default", "aten.cummax.default"],
        error=RuntimeError("x"),
    )
    f = one(compare_runs(run("A", [a]), run("B", [b])), "unsupported_op_new")
    assert f.candidate == "aten.cummax.default" and "aten.cummax.default" in f.message


def test_cell_that_exported_had_no_unsupported_ops():
    b = record(
        status="export_failed",
        stage="translate",
        unsupported_ops=["aten.cummax.default"],
        error=RuntimeError("x"),
    )
    f = one(compare_runs(run("A", [record()]), run("B", [b])), "unsupported_op_new")
    assert f.cell.model == "m" and f.candidate == "aten.cummax.default"


def test_unsupported_ops_none_on_one_side_is_no_finding():
    a = record(status="export_failed", stage="translate", error=RuntimeError("x"))
    b = record(
        status="export_failed",
        stage="translate",
        unsupported_ops=["aten.cummax.default"],
        error=RuntimeError("x"),
    )
    assert "unsupported_op_new" not in kinds(compare_runs(run("A", [a]), run("B", [b])))


def test_aten_op_that_no_longer_exports():
    ops = {"aten.addmm.default": 2, "aten.cummax.default": 1}
    a = [record("m1", aten_ops=ops), record("m2", aten_ops={"aten.relu.default": 1})]
    b = [
        record(
            "m1", aten_ops=ops, status="export_failed", stage="translate", error=RuntimeError("x")
        ),
        record("m2", aten_ops={"aten.relu.default": 1}),
    ]
    lost = [f for f in compare_runs(run("A", a), run("B", b)).findings if f.kind == "aten_op_lost"]
    assert sorted(f.candidate for f in lost) == ["aten.addmm.default", "aten.cummax.default"]
    assert all(f.cell is None and "dynamo" in f.message and "m1" in f.message for f in lost)


def test_cells_that_appear_or_vanish():
    c = compare_runs(
        run("A", [record("old"), record("kept")]), run("B", [record("kept"), record("new")])
    )
    assert one(c, "cell_appeared").cell.model == "new" and one(c, "cell_appeared").severity == INFO
    assert (
        one(c, "cell_vanished").cell.model == "old" and one(c, "cell_vanished").severity == WARNING
    )
    assert c.unchanged == 1


# -- noisy findings, one baseline run ---------------------------------------------------------


def lat(rng, median, sigma=0.03, n=60):
    return samples(rng, median, sigma, n)


def test_latency_30_percent_slower_is_blocking():
    rng = random.Random(1)
    c = compare_runs(run("A", [record(ort=lat(rng, 10.0))]), run("B", [record(ort=lat(rng, 13.0))]))
    f = one(c, "metric_regressed")
    assert (f.metric, f.severity) == ("ort_latency", BLOCKING)
    assert f.ratio == pytest.approx(1.3, rel=0.05) and f.threshold == pytest.approx(1.1)
    assert "Mann-Whitney" in f.evidence


def test_latency_5_percent_slower_is_not_flagged():
    rng = random.Random(2)
    c = compare_runs(run("A", [record(ort=lat(rng, 10.0))]), run("B", [record(ort=lat(rng, 10.5))]))
    assert c.findings == ()


def test_noisy_overlapping_samples_are_not_flagged_even_past_the_floor():
    base = [5.0, 15.0, 8.0, 12.0, 10.0, 20.0, 6.0, 14.0]
    cand = [6.0, 18.0, 9.0, 14.0, 12.5, 24.0, 7.0, 16.0]  # median x1.2, distributions overlap
    c = compare_runs(run("A", [record(ort=base)]), run("B", [record(ort=cand)]))
    assert c.findings == ()
    assert mannwhitneyu(cand, base, method="asymptotic").pvalue > 0.01  # the oracle agrees


def test_a_shift_in_part_of_the_samples_needs_a_large_rank_effect():
    """Half the samples 1.6x slower, half unchanged: median x1.30 and p ~ 1e-5, but a
    candidate sample is slower than a baseline one only 62.5% of the time (a hiccup, not
    a slower model). Flagged only when the required P(slower) is lowered below that."""
    base = [1.0 + 0.001 * i for i in range(200)]
    cand = base[:100] + [x * 1.6 for x in base[100:]]
    assert compare_runs(run("A", [record(ort=base)]), run("B", [record(ort=cand)])).findings == ()
    lenient = Options(thresholds=Thresholds(min_prob_slower=0.6))
    c = compare_runs(run("A", [record(ort=base)]), run("B", [record(ort=cand)]), lenient)
    f = one(c, "metric_regressed")
    assert f.ratio == pytest.approx((1.099 + 1.6 * 1.1) / (1.099 + 1.1), rel=1e-3)
    assert "P(slower)=0.62" in f.evidence


def test_latency_improvement_is_reported_as_an_improvement():
    rng = random.Random(3)
    c = compare_runs(run("A", [record(ort=lat(rng, 10.0))]), run("B", [record(ort=lat(rng, 7.0))]))
    assert one(c, "metric_improved").severity == IMPROVEMENT


def _beside(r, *work):
    return dataclasses.replace(r, worker=WorkerInfo(timed_beside=work or None))


def test_a_timed_finding_names_what_ran_beside_each_sides_timing():
    """Latency and export time timed beside other cells' work say so, side by side; memory
    is not timed, and a side timed alone is not named."""
    rng = random.Random(1)
    base = record(ort=lat(rng, 10.0), rss_mb=100.0, export_s=10.0)
    base = _beside(base, "m torchscript@18: build")
    cand = record(ort=lat(rng, 13.0), rss_mb=200.0, export_s=20.0)
    cand = _beside(cand, "n dynamo@18: export", "n: reference")
    found = {f.metric: f for f in compare_runs(run("A", [base]), run("B", [cand])).findings}
    for timed in ("ort_latency", "export_time"):
        assert found[timed].evidence.endswith(
            "; beside its timing: baseline (m torchscript@18: build),"
            " candidate (n dynamo@18: export, n: reference)"
        )
    assert "beside" not in found["export_memory"].evidence
    alone = _beside(cand)
    found = {f.metric: f for f in compare_runs(run("A", [base]), run("B", [alone])).findings}
    assert found["ort_latency"].evidence.endswith(
        "; beside its timing: baseline (m torchscript@18: build)"
    )


def test_eager_latency_regression_against_one_run_is_info():
    rng = random.Random(4)
    c = compare_runs(
        run("A", [record(eager=lat(rng, 10.0))]), run("B", [record(eager=lat(rng, 13.0))])
    )
    f = one(c, "metric_regressed")
    assert (f.metric, f.severity) == ("eager_latency", INFO)


def test_run_wide_shift_is_divided_out_against_one_run():
    """Every cell 15% slower (a loaded machine) is drift, not six regressions; one cell 60%
    slower on top of it still is one."""
    rng = random.Random(5)
    base = [record(model=f"m{i}", ort=lat(rng, 2.0 + i)) for i in range(6)]
    slower = [
        record(model=f"m{i}", ort=lat(rng, (2.0 + i) * 1.15 * (1.6 if i == 3 else 1.0)))
        for i in range(6)
    ]
    c = compare_runs(run("A", base), run("B", slower))
    regressed = [f for f in c.findings if f.kind == "metric_regressed"]
    assert [f.cell.model for f in regressed] == ["m3"]
    assert regressed[0].ratio == pytest.approx(1.6, rel=0.05)
    assert "run-wide shift x1.15" in regressed[0].evidence


def _spread_runs(target_log_ratio: float) -> tuple[Run, Run]:
    """Nine cells, each timed tightly, whose medians move between the runs by log-ratios
    -0.1 (4 cells), 0 (1), +0.1 (3) and the target's: median 0, MAD 0.1 (the target is the
    largest, so it moves neither), robust sigma 0.1483."""
    rng = random.Random(7)
    moves = [-0.1] * 4 + [0.0] + [0.1] * 3 + [target_log_ratio]
    base = [record(model=f"m{i}", ort=lat(rng, 2.0 + i, 0.005)) for i in range(9)]
    cand = [
        record(model=f"m{i}", ort=lat(rng, (2.0 + i) * math.exp(m), 0.005))
        for i, m in enumerate(moves)
    ]
    return run("A", base), run("B", cand)


def test_run_to_run_noise_across_cells_raises_the_threshold():
    """Cells that moved +-10% around each other between two runs of one build (this
    machine does that) set the bar at 4 x 0.1483 in log: x1.81. A cell 35% slower is
    inside that noise, whatever its rank test says; one 2.2x slower is not."""
    inside = compare_runs(*_spread_runs(0.3))
    assert [f for f in inside.findings if f.kind == "metric_regressed"] == []
    beyond = compare_runs(*_spread_runs(0.8))
    f = one(beyond, "metric_regressed")
    assert (f.cell.model, f.severity) == ("m8", BLOCKING)
    assert f.threshold == pytest.approx(math.exp(4 * 1.4826 * 0.1), rel=0.02)
    assert "run-to-run noise" in f.evidence


def test_a_a_runs_flag_nothing():
    """Two runs drawn from the same distributions (different seeds) must raise nothing."""
    medians = [0.5 * 1.3**i for i in range(25)]

    def draw(seed):
        rng = random.Random(seed)
        return [
            record(
                f"m{i}",
                ort=lat(rng, m, 0.08),
                eager=lat(rng, 2 * m, 0.08),
                export_s=3.0 * (1 + rng.gauss(0, 0.03)),
                rss_mb=400 * (1 + rng.gauss(0, 0.03)),
            )
            for i, m in enumerate(medians)
        ]

    for seed in range(5):
        c = compare_runs(run("A", draw(100 + seed)), run("B", draw(200 + seed)))
        assert c.findings == (), c.findings


def test_export_time_single_sample_floor_alone_decides():
    c = compare_runs(run("A", [record(export_s=10.0)]), run("B", [record(export_s=12.5)]))
    f = one(c, "metric_regressed")
    assert (f.metric, f.severity) == ("export_time", INFO)
    assert "floor" in f.evidence and "alone" in f.evidence
    assert (
        compare_runs(run("A", [record(export_s=10.0)]), run("B", [record(export_s=11.5)])).findings
        == ()
    )


def test_memory_needs_ratio_and_absolute_growth():
    small = compare_runs(
        run("A", [record(rss_mb=50.0)]), run("B", [record(rss_mb=75.0)])
    )  # +50%, +25 MiB
    assert small.findings == ()
    large = compare_runs(run("A", [record(rss_mb=500.0)]), run("B", [record(rss_mb=700.0)]))
    assert one(large, "metric_regressed").metric == "export_memory"


def test_metric_missing_on_one_side_is_counted_not_found():
    c = compare_runs(run("A", [record(export_s=1.0)]), run("B", [record()]))
    assert c.findings == () and c.not_compared == {"export_time: missing on one side": 1}


# -- comparability ------------------------------------------------------------------------------


def test_different_hardware_is_not_comparable():
    other = {"cpu": "Other CPU", "cores": 4, "memory_gb": 16.0, "gpus": []}
    a, b = run("A", [record()]), run("B", [record()], hardware=other)
    with pytest.raises(CompareError, match="not comparable: cpu"):
        check_comparable(a, b, allow_different_hardware=False)
    assert check_comparable(a, b, allow_different_hardware=True)
    assert (
        check_comparable(a, run("C", [record()], torch="2.10.0"), allow_different_hardware=False)
        == []
    )


def test_statuses_only_when_noisy_metrics_are_not_comparable():
    rng = random.Random(5)
    a, b = run("A", [record(ort=lat(rng, 10.0))]), run("B", [record(ort=lat(rng, 20.0))])
    c = compare_runs(a, b, Options(compare_noisy=False))
    assert c.findings == () and c.notes


def test_a_numerics_regression_names_its_first_divergent_node() -> None:
    from harness.store.records import Cell, Measurements, Record
    from harness.store.runs import Run

    cell = Cell("m", "dynamo", 18, family="seed")
    ok = Record.finished(cell, "a", Measurements())
    found = {"node": "node_shift", "op_type": "Add", "aten_op": "t.shift.default",
             "source": "m.py:45 in forward", "max_abs": 1.0, "compared": 3}  # fmt: skip
    bad = Record.finished(
        cell,
        "b",
        measurements(first_divergence=found),
        status="numerics_mismatch",
        stage="numerics",
    )
    comparison = compare_runs(Run(Manifest(run_id="a"), (ok,)), Run(Manifest(run_id="b"), (bad,)))
    (regressed,) = comparison.blocking
    assert regressed.evidence == (
        "first divergent node: node_shift (Add; aten t.shift.default) at m.py:45 in forward, max_abs 1"
    )


def test_a_regression_links_the_candidates_minimal_repro():
    failed = record(status="export_failed", stage="translate", error=RuntimeError("x"))
    failed = changed(
        failed,
        minimal_repro={"reproduces": True, "nodes_before": 600, "nodes_after": 3},
        artifacts={"minimal_repro": "artifacts/m--dynamo/repro_min.py"},
    )
    c = compare_runs(run("A", [record()]), run("B", [failed]))
    f = one(c, "status_regressed")
    assert (f.repro, f.repro_note) == (
        "artifacts/m--dynamo/repro_min.py",
        "reproduces, 600 -> 3 nodes",
    )
    assert f.to_dict()["repro"] == "artifacts/m--dynamo/repro_min.py"
    from harness.compare.output.markdown import to_markdown

    text = to_markdown(c)
    assert "minimal repro: [repro_min.py](results/B/artifacts/m--dynamo/repro_min.py)" in text
    assert "(reproduces, 600 -> 3 nodes)" in text


def test_a_fixed_cell_links_no_repro():
    failed = record(status="export_failed", stage="translate", error=RuntimeError("x"))
    failed = failed.with_changes(artifacts={"minimal_repro": "artifacts/m/repro_min.py"})
    f = one(compare_runs(run("A", [failed]), run("B", [record()])), "status_fixed")
    assert f.repro is None


def test_a_cell_is_keyed_by_its_dtype_and_a_reduced_one_regresses_on_its_own():
    """The float16 cell of a model fails in the candidate while its float32 cell still
    passes: one finding, on the float16 cell, named by its label."""
    plain = record("mlp")
    half = plain.with_cell(dtype=Dtype.FLOAT16)
    broken = changed(half, numerics=[check(max_abs=2.0, ok=False)]).with_changes(
        status=Status.NUMERICS_MISMATCH, stage=Stage.NUMERICS, error_message="1 of 1 differ"
    )
    c = compare_runs(run("A", [plain, half]), run("B", [plain, broken]))
    f = one(c, "status_regressed")
    assert f.cell is not None and f.cell.dtype is Dtype.FLOAT16 and c.unchanged == 1
    assert "float16" in f.cell.label()
    missing = half.with_changes(status=Status.RUNTIME_MISSING, stage=Stage.ORT_SESSION)
    g = one(compare_runs(run("A", [plain, half]), run("B", [plain, missing])), "status_regressed")
    assert g.severity == BLOCKING and "ok -> runtime_missing" in g.message


def test_two_hosts_of_one_cpu_brand_are_not_comparable_and_an_older_run_still_is() -> None:
    zen4 = {"cpu": "AMD EPYC", "cpu_id": "family 25 model 17 stepping 1 avx512f", "cores": 2}
    zen5 = {**zen4, "cpu_id": "family 26 model 2 stepping 0 avx512f avx_vnni"}
    older = {"cpu": "AMD EPYC", "cores": 2}  # written before the manifest named the CPU's identity
    a, b = run("A", [record()], hardware=zen4), run("B", [record()], hardware=zen5)
    with pytest.raises(CompareError, match="not comparable: cpu_id 'family 25 model 17"):
        check_comparable(a, b, allow_different_hardware=False)
    assert (
        check_comparable(run("O", [record()], hardware=older), b, allow_different_hardware=False)
        == []
    )
