"""What a bisection looks for and what one version says about a cell, from `harness
compare`'s own findings on hand-made runs (no torch, no Ray)."""

from __future__ import annotations

import random

import pytest

from harness.bisect.search import Judgement
from harness.bisect.verdict import (
    Criterion,
    CriterionError,
    Target,
    judge,
    op_count_diff,
    targets,
)
from harness.compare import Finding, compare_runs
from harness.store.paired import CellKey
from harness.store.records import Record
from tests.fixtures_compare import changed, record, run, samples

FAILED = dict(status="export_failed", stage="translate", error=RuntimeError("no aten.histc"))


def ok(
    model: str, *, ms: float = 2.0, seed: int = 0, fp: str = "a", ops: dict[str, int] | None = None
) -> Record:
    rng = random.Random(seed)
    r = record(model, ort=samples(rng, ms, 0.02), eager=samples(rng, 4.0, 0.02), opset_actual=18)
    return changed(r, graph_fingerprint=fp, onnx_ops=ops or {"MatMul": 1, "Tanh": 1})


def findings_between(good: list[Record], other: list[Record]) -> list[Finding]:
    return list(compare_runs(run("good", good), run("other", other)).findings)


def key(model: str) -> CellKey:
    return record(model).cell.key


def by_cell(records: list[Record]) -> dict[CellKey, Record]:
    return {r.cell.key: r for r in records}


def test_auto_bisects_the_blocking_findings_and_not_the_warnings_beside_them() -> None:
    good = [ok("widen"), ok("chain", seed=1)]
    bad = [record("widen", **FAILED), changed(ok("chain", seed=2), opset_actual=17)]
    found = targets(findings_between(good, bad), by_cell(good), by_cell(bad), Criterion())
    assert list(found) == [key("widen")]  # the opset change only warns
    assert found[key("widen")].family == "status"
    assert found[key("widen")].kind == "status_regressed"


def test_auto_falls_back_to_warnings_where_nothing_blocks() -> None:
    good = [ok("widen"), ok("chain", seed=1)]
    bad = [ok("widen", seed=3), changed(ok("chain", seed=2), opset_actual=17)]
    found = targets(findings_between(good, bad), by_cell(good), by_cell(bad), Criterion())
    assert {k: t.family for k, t in found.items()} == {key("chain"): "opset"}


def test_naming_a_family_bisects_only_that_family() -> None:
    good = [ok("widen"), ok("chain", seed=1)]
    bad = [record("widen", **FAILED), changed(ok("chain", seed=2), opset_actual=17)]
    found = targets(
        findings_between(good, bad), by_cell(good), by_cell(bad), Criterion.parse(["opset"])
    )
    assert list(found) == [key("chain")]


def test_the_graph_criterion_compares_fingerprints_and_names_the_op_counts() -> None:
    good = [ok("chain", fp="a"), ok("same", fp="s")]
    bad = [ok("chain", fp="b", ops={"MatMul": 64, "Tanh": 64}), ok("same", fp="s", seed=5)]
    found = targets([], by_cell(good), by_cell(bad), Criterion.parse(["graph"]))
    assert list(found) == [key("chain")]
    assert found[key("chain")].message == "graph changed (MatMul 1->64, Tanh 1->64)"


def test_nothing_changed_gives_no_target() -> None:
    good, bad = [ok("chain")], [ok("chain", seed=9)]
    assert targets(findings_between(good, bad), by_cell(good), by_cell(bad), Criterion()) == {}


STATUS = Target("status", "status_regressed", "ok -> export_failed")
LATENCY = Target("ort_latency", "paired_regressed", "ORT latency worse: x16")


def verdict(target: Target, good: Record, step: Record | None) -> tuple[Judgement, str]:
    found = findings_between([good], [step]) if step is not None else []
    v = judge(target, "1.4", found, good, step)
    assert v.version == "1.4"
    return v.judgement, v.reason


def test_a_version_with_the_finding_is_bad_and_says_it() -> None:
    judgement, reason = verdict(STATUS, ok("widen"), record("widen", **FAILED))
    assert judgement is Judgement.BAD
    assert reason.startswith("ok -> export_failed at translate")


def test_a_version_without_it_is_good() -> None:
    assert verdict(STATUS, ok("widen"), ok("widen", seed=4)) == (
        Judgement.GOOD,
        "no status finding",
    )


def test_another_failure_counts_for_a_status_target() -> None:
    crashed = record("widen", status="crashed", stage="capture", error=RuntimeError("SIGSEGV"))
    assert verdict(STATUS, ok("widen"), crashed)[0] is Judgement.BAD


def test_a_latency_target_cannot_be_judged_where_the_cell_no_longer_exports() -> None:
    judgement, reason = verdict(LATENCY, ok("chain"), record("chain", **FAILED))
    assert judgement is Judgement.SKIP
    assert reason == "export_failed: ort_latency not measured"


def test_a_version_whose_cell_has_no_record_is_skipped() -> None:
    assert verdict(STATUS, ok("widen"), None) == (Judgement.SKIP, "no record of the cell")


def test_an_undecided_paired_timing_is_a_skip_not_a_verdict() -> None:
    step = ok("chain", fp="b")
    undecided = Finding(
        "paired_unknown",
        "warning",
        "no verdict after 300 pairs",
        cell=step.cell,
        metric="ort_latency",
    )
    v = judge(LATENCY, "1.4", [undecided], ok("chain"), step)
    assert (v.judgement, v.reason) == (Judgement.SKIP, "no verdict after 300 pairs")
    slower = Finding(
        "paired_regressed",
        "blocking",
        "ORT latency worse: x2.00",
        cell=step.cell,
        metric="ort_latency",
    )
    assert judge(LATENCY, "1.4", [undecided, slower], ok("chain"), step).judgement is Judgement.BAD


def test_the_graph_judge_compares_with_the_good_fingerprint() -> None:
    graph = Target("graph", "graph_changed", "graph changed")
    good = ok("chain", fp="a")
    assert judge(graph, "1.4", [], good, ok("chain", fp="a", seed=3)).judgement is Judgement.GOOD
    changed = judge(graph, "1.4", [], good, ok("chain", fp="b", ops={"MatMul": 2, "Tanh": 1}))
    assert (changed.judgement, changed.reason) == (Judgement.BAD, "graph changed (MatMul 1->2)")
    failed = judge(graph, "1.4", [], good, record("chain", **FAILED))
    assert (failed.judgement, failed.reason) == (
        Judgement.SKIP,
        "export_failed: no graph to compare",
    )


def test_op_count_diff_lists_only_what_changed_and_nothing_without_a_graph() -> None:
    before = ok("m", ops={"MatMul": 1, "Tanh": 1, "Add": 2})
    after = ok("m", ops={"MatMul": 64, "Add": 2, "Gemm": 1})
    assert op_count_diff(before, after) == {"Gemm": [None, 1], "MatMul": [1, 64], "Tanh": [1, None]}
    assert op_count_diff(before, record("m", **FAILED)) == {}


@pytest.mark.parametrize(
    ("names", "families"),
    [
        ((), None),
        (("auto",), None),
        (("latency",), {"ort_latency"}),
        (("status", "graph"), {"status", "graph"}),
        (("export_memory", "export_cuda_memory"), {"export_memory", "export_cuda_memory"}),
    ],
)
def test_finding_names_parse(names: tuple[str, ...], families: set[str] | None) -> None:
    parsed = Criterion.parse(names)
    assert parsed.families == (None if families is None else frozenset(families))


@pytest.mark.parametrize("names", [("speed",), ("auto", "status"), ("status", "cells")])
def test_unknown_finding_names_are_refused_with_the_known_ones(names: tuple[str, ...]) -> None:
    with pytest.raises(CriterionError, match="one of auto, status, opset"):
        Criterion.parse(names)
