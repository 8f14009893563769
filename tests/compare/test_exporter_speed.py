"""Graph speed across exporters between two runs (harness/compare/exporters.py): a graph
that became surely slower than another exporter's warns, one that stopped being so is an
improvement, one slower in both runs or only within its interval says nothing."""

from __future__ import annotations

from harness.compare.comparison import compare_runs
from harness.store.details import ExporterSpeed
from harness.store.manifest import Manifest
from harness.store.records import Cell, Record
from harness.store.runs import Run
from harness.store.status import Status

TS = Cell("m", "torchscript", 18)


def _run(speed: ExporterSpeed | None, run_id: str) -> Run:
    fastest = Record(
        TS.replace(exporter="dynamo"),
        run_id,
        Status.OK,
        exporter_speed=ExporterSpeed("dynamo", 1.0),
    )
    other = Record(TS, run_id, Status.OK, exporter_speed=speed)
    return Run(Manifest(run_id=run_id), (fastest, other))


SLOW = ExporterSpeed("dynamo", 1.6, 1.4, 1.8, 20, "slower")
UNSURE = ExporterSpeed("dynamo", 1.3, 0.9, 1.7, 5, "unknown")  # its interval holds 1
SAME = ExporterSpeed("dynamo", 1.02, 0.98, 1.06, 30, "same")


def _kinds(base: ExporterSpeed | None, cand: ExporterSpeed | None) -> list[tuple[str, str]]:
    found = compare_runs(_run(base, "a"), _run(cand, "b")).findings
    return [(f.kind, f.severity) for f in found if f.family == "exporter_speed"]


def test_a_graph_newly_slower_than_another_exporters_warns() -> None:
    assert _kinds(SAME, SLOW) == [("slower_than_exporter", "warning")]
    assert _kinds(None, SLOW) == [("slower_than_exporter", "warning")]


def test_a_graph_no_longer_slower_is_an_improvement() -> None:
    assert _kinds(SLOW, SAME) == [("exporter_speed_fixed", "improvement")]


def test_slower_in_both_or_not_surely_slower_says_nothing() -> None:
    assert _kinds(SLOW, SLOW) == []
    assert _kinds(SAME, UNSURE) == []
