"""The report of a suite of hundreds of models stays readable: the counts first, the rows
with a failure unfolded, every long table folded, and plots of bounded height."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import build_report, write_reports
from harness.report import data as plot_data
from harness.report.html import render_html
from harness.report.markdown import render_markdown
from harness.store.records import Record
from tests.report.test_plots import png_size
from tests.report.test_report_synthetic import large_records, typed_manifest, write_run

MODELS = 450
MAX_PLOT_HEIGHT_PX = 2800  # the uncompacted matrix of 450 rows would be 60 in x 110 dpi


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return large_records(MODELS)


@pytest.fixture(scope="module")
def markdown(records: list[Record]) -> str:
    return render_markdown(build_report(typed_manifest(), records))


def _failing_models(records: list[Record]) -> set[str]:
    return {r.model for r in records if not r.status.passing}


def _section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_the_summary_comes_before_the_matrix_and_the_failures(markdown: str) -> None:
    assert markdown.startswith(f"{2 * MODELS} cells: ")
    order = [markdown.index(f"\n## {h}\n") for h in ("Summary", "Pass matrix", "Failures")]
    assert order == sorted(order)
    summary = _section(markdown, "Summary")
    assert "| dynamo@18 | 450 |" in summary and "| all | 900 |" in summary


def test_the_matrix_shows_the_failing_rows_and_folds_the_full_matrix(
    markdown: str, records: list[Record]
) -> None:
    matrix = _section(markdown, "Pass matrix")
    failing = _failing_models(records)
    unfolded, folded = matrix.split("<details>\n<summary>450 rows: the full matrix</summary>")
    rows = [line.split(" | ")[0].lstrip("| ") for line in unfolded.splitlines()]
    shown = {r for r in rows if r.startswith("model_")}
    assert shown == failing and 0 < len(failing) < MODELS
    assert folded.count("\n| model_") == MODELS
    assert folded.rstrip().endswith("</details>")


def test_every_long_table_starts_folded(markdown: str) -> None:
    for heading in ("Export", "Latency", "All cells"):
        section = _section(markdown, heading)
        lines = section.splitlines()
        table_rows = [i for i, line in enumerate(lines) if line.startswith("| model_")]
        opened = [i for i, line in enumerate(lines) if line == "<details>"]
        assert opened and table_rows[0] > opened[0], heading


def test_html_folds_the_full_matrix(records: list[Record], tmp_path: Path) -> None:
    page = render_html(build_report(typed_manifest(), records), root=tmp_path)
    assert "<details><summary>450 rows: the full matrix</summary>" in page
    assert page.index("<h2>Summary</h2>") < page.index("<h2>Pass matrix</h2>")


def test_plot_data_keeps_the_most_telling_rows(records: list[Record]) -> None:
    matrix = plot_data.matrix_data(records)
    failing = _failing_models(records)
    assert len(matrix.rows) == plot_data.MAX_MATRIX_ROWS < len(failing)
    assert set(matrix.rows) <= failing
    assert matrix.omitted_passing == MODELS - len(failing)
    assert matrix.omitted_failing == len(failing) - len(matrix.rows)
    cost = plot_data.export_cost_data(records)
    assert len(cost.rows) == plot_data.MAX_BAR_ROWS and cost.omitted == MODELS - len(cost.rows)
    slowest = max(r.export.seconds or 0 for r in records)
    assert max(v or 0 for v in cost.export_s[0]) == pytest.approx(slowest)
    latency = plot_data.latency_data(records)
    assert latency.omitted == MODELS - plot_data.MAX_BAR_ROWS
    smallest = min(r.speedup for r in records if r.speedup is not None)
    assert min(s.p50 for s in latency.speedup[0] if s) == pytest.approx(smallest)
    coverage = plot_data.coverage_data(records)
    assert len(coverage.ops) == plot_data.MAX_COVERAGE_OPS and coverage.omitted > 0
    assert all("fails" in line for line in coverage.state[:7])  # aten.op0..6 fail somewhere


@pytest.mark.slow
def test_plots_of_a_large_run_have_a_bounded_height(records: list[Record], tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", records)
    written = write_reports(run)
    pngs = sorted(p for p in written if p.suffix == ".png")
    assert {p.stem for p in pngs} >= {"matrix", "export_cost", "latency", "coverage"}
    for png in pngs:
        assert png_size(png)[1] <= MAX_PLOT_HEIGHT_PX, png.name


def test_skipped_models_are_grouped_by_reason_not_listed_as_passing_rows() -> None:
    """A generated zoo (the transformers suite) skips hundreds of models it cannot build:
    the matrix says how many rows are skipped throughout, and one table groups the reasons."""
    from harness.store.records import Cell
    from harness.store.status import Status

    reasons = ["does not build: ImportError: needs timm", "does not run in eager: ValueError: x"]
    skipped = [
        Record.without_run(
            Cell(f"skipped_{i:03d}", exporter, 18, family="vision"),
            "run",
            status=Status.SKIPPED,
            reason=reasons[i % 3 == 0],
        )
        for i in range(300)
        for exporter in ("dynamo", "torchscript")
    ]
    text = render_markdown(build_report(typed_manifest(), [*large_records(MODELS), *skipped]))
    assert "300 of them skipped in every column: see Skipped" in _section(text, "Pass matrix")
    section = _section(text, "Skipped")
    assert "600 cells of 300 models skipped, in 2 groups by reason, largest first." in section
    lines = [ln for ln in section.splitlines() if ln.startswith("| does not")]
    assert [ln.split(" | ")[:2] for ln in lines] == [
        ["| does not build: ImportError: needs timm", "400"],
        ["| does not run in eager: ValueError: x", "200"],
    ]
    assert "skipped_001, skipped_002, " in lines[0] and "and 192 more" in lines[0]
