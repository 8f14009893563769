"""benchmarks/real_size_account.py, the accountant benchmarks/README.md's real-size figures
come from: its loops by side and thread count, on records as a run writes them."""

from __future__ import annotations

import pytest

from benchmarks.real_size_account import loop_lines, loop_seconds, loops, loops_by_hold
from harness.store.measures import EagerMeasures, OrtMeasures, ShapeLatency
from harness.store.records import Cell, Latency, Record
from tests.fixtures_compare import measurements


def _record(exporter: str, ort: list[float], eager: list[float], timed_by: str | None) -> Record:
    """A cell timed at its own thread count and at 2; eager taken from `timed_by`'s cell."""
    at_two = ShapeLatency.of(None, [x / 2 for x in ort], [x / 2 for x in eager], timed_by)
    return Record.finished(Cell("real.m", exporter, 18), "r", measurements()).with_changes(
        ort=OrtMeasures(latency=Latency.from_samples(ort)),
        eager=EagerMeasures(latency=Latency.from_samples(eager), timed_by=timed_by),
        thread_latency={"2": at_two},
    )


def test_each_loop_is_counted_once_and_taken_eager_not_at_all() -> None:
    """The second exporter's cell took its eager samples from the first's: its eager loops
    were not run, so they are neither seconds nor loops of the account."""
    first = _record("dynamo", [100.0, 300.0, 200.0], [400.0, 400.0, 400.0], None)
    second = _record("torchscript", [1000.0, 1000.0], [400.0, 400.0, 400.0], "dynamo@18")
    # each with its thread count (0: the record's), which says how it held the node
    assert sorted((kind, threads) for kind, threads, _ in loops([first, second])) == [
        ("ORT at 2 threads", 2), ("ORT at 2 threads", 2), ("ORT at the record's threads", 0),
        ("ORT at the record's threads", 0), ("eager at 2 threads", 2),
        ("eager at the record's threads", 0),
    ]  # fmt: skip
    assert first.ort.latency is not None
    assert loop_seconds(first.ort.latency) == (600 + 2 * 300) / 1000  # calls and warm-up
    assert loop_lines([first, second]) == [
        "  ORT at 2 threads: 1 s of calls in 2 loops, 2.5 calls each (median)",
        "  ORT at the record's threads: 3 s of calls in 2 loops, 2.5 calls each (median)",
        "  eager at 2 threads: 1 s of calls in 1 loops, 3 calls each (median)",
        "  eager at the record's threads: 1 s of calls in 1 loops, 3 calls each (median)",
    ]


def test_the_records_own_loops_hold_the_node_as_the_runs_threads_do() -> None:
    """On 2 cores a run at 1 thread times the record's own loops on a core of their own
    and its 2-thread loops with the node alone; a run at 2 threads times both alone."""
    first = _record("dynamo", [100.0, 300.0, 200.0], [400.0, 400.0, 400.0], None)
    own = loop_seconds(first.ort.latency) + loop_seconds(first.eager.latency)
    at_two = first.thread_latency["2"]
    two = loop_seconds(at_two.ort_latency_ms) + loop_seconds(at_two.eager_latency_ms)
    assert loops_by_hold([first], cores=2, run_threads=1) == (own, two)
    assert loops_by_hold([first], cores=2, run_threads=2) == (0.0, pytest.approx(own + two))


def test_an_ort_latency_its_pair_timed_is_the_pairs_not_a_loop() -> None:
    """Under ort_from_pairs a record's ORT latency at its threads is its exporter pair's
    calls: the pair's seconds count them, so no loop of the record does."""
    first = _record("dynamo", [100.0, 300.0, 200.0], [400.0, 400.0, 400.0], None)
    paired = first.with_changes(ort=OrtMeasures(latency=first.ort.latency, timed_in="pair"))
    kinds = sorted(kind for kind, _, _ in loops([paired]))
    assert kinds == ["ORT at 2 threads", "eager at 2 threads", "eager at the record's threads"]
