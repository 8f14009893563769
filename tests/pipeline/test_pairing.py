"""Graph speed across exporters (harness/pipeline/pairing.py), without a run: the groups of
cells, the fastest first, and each cell's speed against the fastest from hand-made pair
results (log-ratios of the other graph over the first's)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from harness.pipeline.pairing import PairedTiming, fastest_first, group_of, speeds, with_pair
from harness.store.details import ExporterSpeed, WorkerInfo
from harness.store.measures import EagerMeasures, Latency
from harness.store.paired import PairResult
from harness.store.protocol import Protocol
from harness.store.records import Cell, OrtMeasures, Record
from harness.store.status import Status


def _ok(exporter: str, p50: float) -> Record:
    cell = Cell("m", exporter, 18, dtype="float32")
    latency = Latency.from_samples([p50] * 6)
    eager = EagerMeasures(latency=Latency.from_samples([1.0] * 6))
    return Record(cell, "r", Status.OK, ort=OrtMeasures(latency=latency), eager=eager)


def _pair(estimate: float, low: float, high: float, pairs: int = 20) -> PairResult:
    return PairResult(
        ("k",),
        log_ratios=(estimate,) * pairs,
        verdict="slower",
        estimate=estimate,
        low=low,
        high=high,
        seconds=12.5,
        node_wait_s=4.5,
    )


def test_cells_of_one_model_and_axes_are_one_group_whatever_their_exporter() -> None:
    a, b = Cell("m", "dynamo", 18), Cell("m", "torchscript", 18)
    assert group_of(a) == group_of(b) != group_of(Cell("m", "dynamo", 17))
    ranked = fastest_first([_ok("dynamo", 3.0), _ok("torchscript", 2.0)])
    assert [r.exporter for r in ranked] == ["torchscript", "dynamo"]


def test_the_other_graphs_speed_is_its_pairs_ratio_over_the_fastest() -> None:
    first = _ok("torchscript", 2.0)
    found = speeds(first, {"dynamo": _pair(math.log(1.5), math.log(1.4), math.log(1.6))})
    mine = found[first.cell.key]
    other = found[first.cell.replace(exporter="dynamo").key]
    assert (mine.fastest, mine.ratio, mine.ci_low) == ("torchscript", 1.0, None)
    assert (other.fastest, other.pairs) == ("torchscript", 20)
    assert (other.ratio, other.ci_low, other.ci_high) == pytest.approx((1.5, 1.4, 1.6), abs=1e-4)
    assert (other.seconds, mine.seconds) == (12.5, None)  # the pair's time, on its cell
    assert (other.node_wait_s, mine.node_wait_s) == (4.5, None)  # of which it waited


def test_a_pair_that_finds_the_other_faster_makes_it_the_fastest() -> None:
    """Chosen by its own p50, the first was not the fastest: the pair says the other graph
    takes 0.8 of its time, so the first is 1.25 of the other's, its interval inverted."""
    first = _ok("dynamo", 2.0)
    faster = replace(_pair(math.log(0.8), math.log(0.7), math.log(0.9)), verdict="faster")
    found = speeds(first, {"torchscript": faster})
    mine = found[first.cell.key]
    other = found[first.cell.replace(exporter="torchscript").key]
    assert (other.fastest, other.ratio, other.ci_low) == ("torchscript", 1.0, None)
    assert mine.fastest == "torchscript"
    assert (mine.ratio, mine.ci_low, mine.ci_high) == pytest.approx(
        (1.25, 1 / 0.9, 1 / 0.7), abs=1e-3
    )
    assert (mine.seconds, other.seconds) == (12.5, None)  # the one pair, counted once
    assert mine.verdict == "slower"  # the other graph was faster: from this one's side


def test_a_pair_that_could_not_be_timed_says_why() -> None:
    first = _ok("dynamo", 2.0)
    found = speeds(first, {"torchscript": PairResult(("k",), error="OSError: no graph")})
    other = found[first.cell.replace(exporter="torchscript").key]
    assert (other.ratio, other.error, other.fastest) == (None, "OSError: no graph", "dynamo")
    assert other.seconds is None  # a task that died before timing says no time, not 0 s
    assert found[first.cell.key].ratio == 1.0
    late = PairResult(("k",), error="TimeoutError: session", seconds=40.0, node_wait_s=30.0)
    key = first.cell.replace(exporter="torchscript").key
    failed = speeds(first, {"torchscript": late})[key]
    assert (failed.seconds, failed.node_wait_s) == (40.0, 30.0)  # what it spent failing


# -- ORT latency from the pairs (the protocol's ort_from_pairs) ------------------------------


def _untimed(exporter: str) -> Record:
    """An ok cell that left its ORT latency to its pair: eager timed, ORT not."""
    return _ok(exporter, 1.0).with_changes(
        ort=OrtMeasures(), worker=WorkerInfo(timed_beside=("n torchscript@18: build",))
    )


def test_cells_that_left_their_latency_to_the_pair_rank_after_those_timed() -> None:
    records = [_untimed("dynamo"), _ok("torchscript", 2.0), _untimed("custom")]
    assert fastest_first(records) == [records[1]]  # as a run without ort_from_pairs
    ranked = fastest_first(records, untimed=True)
    assert [r.exporter for r in ranked] == ["torchscript", "dynamo", "custom"]


def test_a_paired_cell_takes_its_graphs_calls_in_the_pair_as_its_latency() -> None:
    """The record's ORT latency is its side's calls, their runtime the pair's, and what ran
    beside the pair joins what ran beside the cell's own timings."""
    speed = ExporterSpeed(fastest="torchscript", ratio=1.2, ci_low=1.1, ci_high=1.3, pairs=5)
    runtime = {"onnxruntime": "1.0", "session_options": {"intra_op_num_threads": 1}}
    timing = PairedTiming(speed, (5.0, 7.0, 6.0, 6.5), runtime, ("p dynamo@18: export",))
    record = with_pair(_untimed("dynamo"), timing)
    assert record.ort.latency is not None and record.ort.latency.samples == (5.0, 7.0, 6.0, 6.5)
    assert record.ort.latency.p50 == pytest.approx(6.25)
    assert record.ort.timed_in == "pair" and record.exporter_speed == speed
    assert record.ort.runtime is not None and record.ort.runtime.onnxruntime == "1.0"
    assert record.worker and record.worker.timed_beside == (
        "n torchscript@18: build",
        "p dynamo@18: export",
    )
    assert record.to_dict()["ort_timed_in"] == "pair"
    assert record.speedup == pytest.approx(1.0 / 6.25)  # eager's p50 over the pair's


def test_a_graph_timed_alone_has_no_speed_and_a_cells_own_latency_stays() -> None:
    alone = with_pair(_untimed("torchscript"), PairedTiming(ort_ms=(3.0, 4.0, 5.0)))
    assert alone.ort.timed_in == "alone" and alone.exporter_speed is None
    assert alone.ort.latency is not None and alone.ort.latency.p50 == 4.0
    own = _ok("dynamo", 2.0)
    kept = with_pair(own, PairedTiming(ExporterSpeed(fastest="dynamo", ratio=1.0), (9.0,)))
    assert kept.ort == own.ort and kept.exporter_speed == ExporterSpeed(fastest="dynamo", ratio=1.0)


def test_the_ledger_reads_its_entries_and_those_of_runs_before_it() -> None:
    """An entry as written now reads back the same; one from before ort_from_pairs (a speed
    alone) reads as a speed without calls."""
    timing = PairedTiming(
        ExporterSpeed(fastest="dynamo", ratio=1.0), (1.5, 2.5), {"a": "b"}, ("x",)
    )
    assert PairedTiming.from_dict(json.loads(json.dumps(timing.to_dict()))) == timing
    assert PairedTiming(ort_ms=(1.0,)).to_dict() == {"ort_ms": [1.0]}
    older = {"cell": "c", "speed": {"fastest": "dynamo", "ratio": 1.0}}
    assert PairedTiming.from_dict(older) == PairedTiming(ExporterSpeed(fastest="dynamo", ratio=1.0))


@pytest.mark.parametrize(
    ("cell", "paired", "left_to_pair"),
    [
        (Cell("m", "dynamo", 18), True, True),
        (Cell("m", "dynamo", 18), False, False),  # no other exporter: no pair times it
        (Cell("m", "dynamo", 18, device="cuda"), True, False),  # pairs time on the CPU
        (Cell("m", "dynamo", 18, ort_opt="none"), True, False),  # pairs: ORT's default level
    ],
)
def test_a_cell_leaves_its_latency_to_a_pair_only_where_one_times_it_alike(
    cell: Cell, paired: bool, left_to_pair: bool
) -> None:
    from harness.pipeline.execute import _cell_protocol

    protocol = Protocol(pair_exporters=True, ort_from_pairs=True)
    assert _cell_protocol(protocol, cell, paired=paired).ort_from_pairs is left_to_pair
    assert _cell_protocol(Protocol(), cell, paired=paired).ort_from_pairs is False
