"""One Status, and every consumer agrees with its table: the progress line, the report's
verdict and summary, the plots, the comparison, the ratchet, coverage and
expectations all ask the same facts (the copies used to disagree: progress counted
an xpass as a failure while the report did not)."""

from __future__ import annotations

import io
from datetime import date
from pathlib import Path

import pytest

from harness.compare import Options, compare_runs
from harness.compare.ratchet import ratchet_findings
from harness.coverage.matrix import FAILS, OK, UNKNOWN, WRONG, op_cell_state
from harness.progress import Progress
from harness.report.data import matrix_data
from harness.report.document import Document, Section, Table, Text
from harness.report.html import render_html
from harness.report.outcomes import summary_rows, verdict
from harness.store.manifest import Manifest
from harness.store.records import Cell, Measurements, Record
from harness.store.runs import Run
from harness.store.status import Stage, Status
from harness.zoo.expect import Expect, judge
from harness.zoo.expected_file import ExpectedFile

CELL = Cell("m", "dynamo", 18, family="seed")


def _record(status: Status) -> Record:
    if status.ran:
        return Record.finished(CELL, "r", Measurements(), status=status, stage=_stage(status))
    return Record.without_run(CELL, "r", status=status, reason="why")


def _stage(status: Status) -> Stage | None:
    return next((s for s in Stage if s.failure_status is status), None)


@pytest.mark.parametrize("status", list(Status))
def test_progress_report_and_summary_count_failures_as_the_table_says(status: Status) -> None:
    progress = Progress(total=1, stream=io.StringIO())
    progress.update(_record(status))
    failed = 0 if status.passing else 1
    assert progress.failures == failed
    assert ("failed" in verdict([_record(status)])) is (not status.passing)
    headers_row = summary_rows([_record(status)])[-1]
    assert headers_row[3] == str(failed)  # the "failed" column


@pytest.mark.parametrize("status", list(Status))
def test_plots_and_html_colour_from_the_table(status: Status) -> None:
    data = matrix_data([_record(status)])
    assert data.status == ((status,),)
    table = Table(("c",), ((Text("x", status=status),),))
    doc = Document("verdict", "heading", (Section("s", (table,)),))
    assert f'class="s-{status.colour.css}"' in render_html(doc, root=Path("."))


@pytest.mark.parametrize("status", list(Status))
def test_comparison_and_ratchet_block_exactly_the_failing_statuses(status: Status) -> None:
    base = Run(Manifest(run_id="a"), (_record(Status.OK),))
    cand = Run(Manifest(run_id="b"), (_record(status),))
    found = compare_runs(base, cand, Options(compare_noisy=False))
    assert bool(found.blocking) is status.blocking
    expected = ExpectedFile("status.csv", ())
    ratchet = ratchet_findings([_record(status)], expected, today=date(2026, 1, 1), command="c")
    assert any(f.severity == "blocking" for f in ratchet) is (status.rank > 0)
    assert (status.rank > 0) is (not status.passing)


@pytest.mark.parametrize("status", list(Status))
def test_coverage_reads_an_op_cell_from_the_table(status: Status) -> None:
    state = op_cell_state(_record(status)).state
    if status.exported:
        assert state == OK
    elif status.wrong_numbers:
        assert state == WRONG
    elif not status.judged:
        assert state == UNKNOWN
    else:
        assert state == FAILS


@pytest.mark.parametrize("status", list(Status))
def test_expectations_judge_only_what_ran(status: Status) -> None:
    any_failure = (Expect.legacy("dynamo", "known"),)
    judged = judge(_record(status), any_failure, date(2026, 1, 1)).status
    if not status.ran or status.by_expectation:
        assert judged is status
    elif status is Status.OK:
        assert judged is Status.XPASS
    else:
        assert judged is Status.XFAIL
