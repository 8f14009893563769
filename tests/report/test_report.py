"""report.md, report.html, the end-of-run summary table and `harness report`."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.report import (
    build_report,
    summary_table,
    verdict,
    write_reports,
    write_trend_report,
)
from harness.report.document import MISSING, safe_link
from harness.report.html import render_html
from harness.report.markdown import render_markdown
from harness.store.manifest import Manifest
from harness.store.records import Cell, Measurements, Record
from tests.fixtures_compare import changed, measurements
from tests.report.test_report_synthetic import (
    BASELINE_ID,
    baseline_records,
    cell,
    check_golden,
    history_runs,
    mixed_records,
    ok,
    typed_manifest,
    write_run,
)

VERDICT = (
    "20 cells: 9 ok, 2 xfail, 1 skipped, 8 failed (export_failed 2, ort_run_failed 1, "
    "numerics_mismatch 1, dynamic_mismatch 1, timeout 1, crashed 1, not_attempted 1)"
)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with a baseline, reported once with every plot (the slow part, shared)."""
    root = tmp_path_factory.mktemp("rendered")
    base = write_run(root / "base", baseline_records(), typed_manifest(BASELINE_ID))
    run = write_run(root / "run", mixed_records())
    write_reports(run, baseline=base)
    return run


@pytest.fixture
def markdown() -> str:
    return render_markdown(build_report(typed_manifest(), mixed_records()))


def _section(text: str, heading: str) -> str:
    """The text of a '## heading' section, up to the next '## '."""
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


# -- the verdict and the summary table ----------------------------------------------------------


def test_verdict_counts_every_outcome() -> None:
    assert verdict(mixed_records()) == VERDICT
    assert verdict([]) == "0 cells: nothing ran"


def test_summary_table_has_a_row_per_exporter_opset_and_a_total() -> None:
    lines = summary_table(mixed_records()).splitlines()
    assert lines[0].split() == [
        "exporter@opset",
        "cells",
        "ok",
        "failed",
        "xfail",
        "xpass",
        "skipped",
        "export",
        "s",
        "speedup",
    ]
    assert [line.split()[0] for line in lines[2:6]] == [
        "dynamo@17",
        "dynamo@18",
        "torchscript@17",
        "torchscript@18",
    ]
    assert lines[2].split() == ["dynamo@17", "5", "2", "2", "0", "0", "1", "8.50", "1.50×"]
    assert lines[-1].split()[:7] == ["all", "20", "9", "8", "2", "0", "1"]
    assert len(lines) <= 25 and max(map(len, lines)) <= 100


def test_summary_table_shows_missing_medians_as_a_dash() -> None:
    skipped = Record.without_run(Cell("m", "dynamo", 18), "r", status="skipped", reason="no")
    assert summary_table([skipped]).splitlines()[2].split()[-2:] == [MISSING, MISSING]


# -- report.md -----------------------------------------------------------------------------------


def test_report_md_starts_with_the_verdict(markdown: str) -> None:
    assert markdown.splitlines()[0] == VERDICT


def test_report_md_matches_golden(markdown: str) -> None:
    check_golden("report_mixed.md", markdown)


def test_report_md_names_the_environment(markdown: str) -> None:
    env = _section(markdown, "Environment")
    for text in (
        "torch 2.9.0",
        "onnxscript 0.5.4",
        "AMD EPYC 7B13, 16 cores",
        "threads=2",
        "41m 07s",
    ):
        assert text in env


def test_report_md_matrix_has_a_row_per_model_and_shape(markdown: str) -> None:
    matrix = _section(markdown, "Pass matrix")
    rows = [
        line.split(" | ")[0].lstrip("| ") for line in matrix.splitlines() if line.startswith("| ")
    ]
    assert rows == [
        "model",
        "alexnet",
        "bert_tiny",
        "gpt2_small",
        "gpt2_small (dynamic)",
        "whisper_enc",
    ]
    assert "| alexnet | ✅ ok 18≠17 |" in matrix
    assert "❌ export (translate)" in matrix and "⚠️ numerics" in matrix and "💥 crashed" in matrix
    assert "Legend: " in matrix


def test_report_md_groups_failures_by_signature(markdown: str) -> None:
    failures = _section(markdown, "Failures")
    groups = re.findall(r"^### (\d+) cells? — ([a-z_, ]+):", failures, flags=re.M)
    assert groups[0] == ("2", "export_failed")
    assert sorted(int(n) for n, _ in groups) == [1, 1, 1, 1, 1, 1, 2]
    folder = "artifacts/bert_tiny--dynamo--op17--cpu--static--base/"
    assert f"[{folder}]({folder})" in failures
    assert "/tmp/build/17/fx.py" in failures  # the first message, verbatim


def test_report_md_renders_missing_values_as_a_dash_never_zero(markdown: str) -> None:
    export = _section(markdown, "Export")
    assert "| bert_tiny | — | — | 1.50 | 1.60 |" in export
    latency = _section(markdown, "Latency")
    assert "| gpt2_small | — | 12.0 (11.2–12.8) | — | — |" in latency
    for text in (export, latency):
        assert "| 0.00 |" not in text and "| 0 |" not in text and "| 0.00× |" not in text


def test_report_names_zoo_files_that_did_not_import() -> None:
    problems = [{"source": "zoo/broken.py", "error": "SyntaxError: invalid syntax"}]
    text = render_markdown(build_report(typed_manifest(zoo_problems=problems), mixed_records()))
    assert "- **zoo problem**: `zoo/broken.py: SyntaxError: invalid syntax`" in text


def test_report_is_robust_to_a_bare_manifest() -> None:
    text = render_markdown(build_report(Manifest.from_dict({"schema": 1}), []))
    assert text.splitlines()[0] == "0 cells: nothing ran"
    assert "## Pass matrix" in text


# -- report.html and the plots of a run ------------------------------------------------------------


def test_write_reports_writes_documents_and_plots(rendered: Path) -> None:
    assert (rendered / "report.md").read_text().splitlines()[0] == VERDICT
    pngs = sorted(p.name for p in (rendered / "plots").glob("*.png"))
    assert pngs == [
        "comparison.png",
        "coverage.png",
        "export_cost.png",
        "latency.png",
        "matrix.png",
        "opset_effect.png",
    ]
    assert "![Pass matrix](plots/matrix.png)" in (rendered / "report.md").read_text()
    assert (
        "## Latency against baseline 2025-05-31T02-00-00-base"
        in (rendered / "report.md").read_text()
    )


def test_html_names_every_cell(rendered: Path) -> None:
    page = (rendered / "report.html").read_text()
    for r in mixed_records():
        row = re.search(rf'<tr id="cell-{re.escape(r.cell.cell_id)}">(.*?)</tr>', page)
        assert row, r.cell.label()
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))
        shape = "dynamic" if r.dynamic else "static"
        assert cells[:3] == [r.model, r.exporter, str(r.opset)] and cells[5] == shape


def test_html_is_self_contained(rendered: Path) -> None:
    page = (rendered / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert f'<p class="verdict">{VERDICT}</p>' in page
    assert "<script" not in page and "http://" not in page and "https://" not in page
    assert page.count('src="data:image/png;base64,') == 6
    assert 'href="artifacts/bert_tiny--dynamo--op17--cpu--static--base/"' in page
    # the matrix, the legend and the plots share one palette
    assert 'class="s-export"' in page and ".s-export { background: #D55E00;" in page


def test_no_plots_writes_only_the_documents(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", mixed_records())
    written = write_reports(run, plots=False)
    assert [p.name for p in written] == ["report.md", "report.html"]
    assert not (run / "plots").exists()


# -- harness report ---------------------------------------------------------------------------------


def test_cli_report_rebuilds_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "run", mixed_records())
    assert main(["report", str(run), "--no-plots"]) == 0
    assert (run / "report.html").is_file()
    assert str(run / "report.md") in capsys.readouterr().out


def test_cli_report_says_a_torn_record_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose driver died mid-write: its report's tables miss that cell (the run said
    '3 ok' of 4 cells and nothing else), so the command says which line and what to do."""
    run = write_run(tmp_path / "run", mixed_records())
    lines = (run / "records.jsonl").read_text().splitlines()
    (run / "records.jsonl").write_text("\n".join([*lines[:-1], lines[-1][:40]]))
    assert main(["report", str(run), "--no-plots"]) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        f"warning: records.jsonl:{len(lines)} is a record cut short and is left out;"
        f" `harness run --resume {run}` runs its cell again"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["report"],
        ["report", "no/such/run"],
        ["report", "--no-plots", "RUN", "--baseline", "no/such/run"],
        ["report", "--history", "--db", "no/such.sqlite"],
        ["report", "--history", "RUN"],
    ],
)
def test_cli_report_usage_errors_exit_2(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "run", mixed_records())
    argv = [str(run) if a == "RUN" else a for a in argv]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_cli_report_refuses_a_directory_that_is_not_a_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path), "--no-plots"]) == 2
    assert "manifest.json" in capsys.readouterr().err


def test_trend_report_lists_flagged_cells(tmp_path: Path) -> None:
    written = write_trend_report(history_runs(), tmp_path, plots=False)
    assert [p.name for p in written] == ["trends.md", "trends.html"]
    text = written[0].read_text()
    assert text.splitlines()[0] == (
        "6 runs from 2025-06-01 to 2025-06-06: of 3 cells, 1 slower than their recent median +10% "
        "in the latest run, 1 in the last 7 runs"
    )
    assert (
        "| alexnet dynamo@18 cpu | 2025-06-04, 2025-06-05, 2025-06-06 | 3.81 | 5.37 | 1.41× |"
        in text
    )
    assert "| 2025-06-04T02-00-00 | 2025-06-04 | 2.10.0 |" in text


def test_cli_report_history_draws_trends_from_the_database(tmp_path: Path) -> None:
    history = pytest.importorskip("harness.history.db")
    runs = [write_run(tmp_path / r.run_id, r.records, r.manifest) for r in history_runs()]
    db = tmp_path / "history.sqlite"
    history.add_runs(db, runs)
    assert main(["report", "--history", "--db", str(db), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "plots" / "trends.png").is_file()
    assert (tmp_path / "out" / "trends.md").read_text().startswith("6 runs from 2025-06-01")


def test_trends_leave_out_runs_of_another_host_and_keep_runs_that_did_not_name_theirs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = pytest.importorskip("harness.history.db")
    runs = history_runs()  # nights 1-3 name no CPU identity; 4 on another host; 5-6 on this
    hosts = {3: "family 26 model 2 avx512f", 4: "family 25 model 17 avx512f"}
    hosts[5] = hosts[4]
    for i, host in hosts.items():
        hardware = dataclasses.replace(runs[i].manifest.hardware, cpu_id=host)
        manifest = dataclasses.replace(runs[i].manifest, hardware=hardware)
        runs[i] = dataclasses.replace(runs[i], manifest=manifest)
    db = tmp_path / "history.sqlite"
    history.add_runs(db, [write_run(tmp_path / r.run_id, r.records, r.manifest) for r in runs])
    assert main(["report", "--history", "--db", str(db), "--out", str(tmp_path / "out")]) == 0
    assert "1 runs measured differently from the latest left out" in capsys.readouterr().out
    trends = (tmp_path / "out" / "trends.md").read_text()
    assert trends.startswith("5 runs from 2025-06-01 to 2025-06-06")
    assert "| 2025-06-04T02-00-00 |" not in trends and "| 2025-06-05T02-00-00 |" in trends


# -- links from a records file -------------------------------------------------------------------

HOSTILE = {
    "javascript": "javascript:alert(document.cookie)//x.md",
    "data": "data:text/html,<script>alert(1)</script>/x.md",
    "file": "file:///etc/passwd/x",
    "absolute": "/etc/passwd/x",
    "escape": "../../home/user/.ssh/id_rsa",
}


@pytest.mark.parametrize(
    "target",
    ["artifacts/m--dynamo/", "plots/a.png", "a/../b/", "https://example.com/x", "http://e.org"],
)
def test_relative_paths_and_web_urls_may_be_links(target: str) -> None:
    assert safe_link(target) == target


@pytest.mark.parametrize(
    "target",
    [
        *HOSTILE.values(),
        "JavaScript:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "//evil.example/x",
        "\\\\evil.example\\share",
        "C:\\Windows\\x",
        "https:no-host",
        "mailto:someone@example.com",
        "a/../../b",
        "..",
        "",
    ],
)
def test_anything_else_is_no_link(target: str) -> None:
    assert safe_link(target) is None


def test_hostile_artifacts_render_as_escaped_text(tmp_path: Path) -> None:
    records = mixed_records()  # the cells after the first five keep their own artifacts
    for i, target in enumerate(HOSTILE.values()):
        records[i] = records[i].with_changes(artifacts={"report": target})
    page = render_html(build_report(typed_manifest(), records), root=tmp_path)
    markdown = render_markdown(build_report(typed_manifest(), records))
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert hrefs and all(h.startswith("artifacts/") for h in hrefs), hrefs
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "javascript:alert(document.cookie)/" in page  # shown, as text
    assert "](javascript:" not in markdown and "](/etc" not in markdown
    assert "](../" not in markdown and "](data:" not in markdown


def test_the_exporter_cold_start_is_its_own_table() -> None:
    cold = [
        {
            "exporter": "dynamo",
            "variant": "base",
            "seconds": 2.0,
            "cpu_seconds": 1.9,
            "peak_rss_mb": 140.0,
        },
        {
            "exporter": "dynamo",
            "variant": "base",
            "seconds": 2.4,
            "cpu_seconds": 1.7,
            "peak_rss_mb": 160.0,
        },
        {"exporter": "torchscript", "variant": "base", "error": "boom"},
    ]
    records = [ok(cell("a", "dynamo", 18), export_s=1.0, rss=10.0, ort=1.0, eager=2.0)]
    text = render_markdown(build_report(typed_manifest(cold_start=cold), records))
    assert "Exporter cold start (first export in a worker process)" in text
    assert "| dynamo | base | 2 | 2.20 (2.00–2.40) | 1.80 (1.70–1.90) | 150 (140–160) |" in text
    assert "| torchscript | base | 1 (1 failed) | — | — | — |" in text


def test_a_numerics_failure_shows_its_first_divergent_node() -> None:
    c = cell("a", "dynamo", 18)
    found = {"node": "node_shift", "op_type": "Add", "aten_op": "t.shift.default", "max_abs": 1.0}
    bad = Record.finished(
        c, "r", measurements(first_divergence=found), status="numerics_mismatch", stage="numerics"
    )
    text = render_markdown(build_report(typed_manifest(), [bad]))
    assert "| cell | status | stage | first divergent node | artifacts |" in text
    assert "node_shift (Add; aten t.shift.default), max_abs 1" in text


def test_a_failure_cluster_links_its_minimal_repro_and_names_the_stage(tmp_path: Path) -> None:
    c = cell("a", "dynamo", 18)
    stage = {
        "stage": "optimization",
        "optimizer_step": {"pass": "RewritePass (iteration 1)", "rule": "FoldSinOfCos"},
    }
    found = {"node": "node_Cos_1", "op_type": "Cos", "max_abs": 0.16}
    bad = Record.finished(
        c,
        "r",
        measurements(first_divergence=found, mismatch_stage=stage),
        status="numerics_mismatch",
        stage="numerics",
    )
    bad = changed(
        bad,
        minimal_repro={"reproduces": True, "nodes_before": 163, "nodes_after": 2},
        artifacts={"minimal_repro": f"artifacts/{c.cell_id}/repro_min.py"},
    )
    text = render_markdown(build_report(typed_manifest(), [bad]))
    assert "| first divergent node | changed by | minimal repro | artifacts |" in text
    assert "optimization: RewritePass (iteration 1), rule FoldSinOfCos" in text
    assert f"[reproduces, 163 -> 2 nodes](artifacts/{c.cell_id}/repro_min.py)" in text
    (tmp_path / "artifacts" / c.cell_id).mkdir(parents=True)
    (tmp_path / "artifacts" / c.cell_id / "repro_min.py").write_text("")
    html = render_html(build_report(typed_manifest(), [bad]), root=tmp_path)
    assert f'href="artifacts/{c.cell_id}/repro_min.py"' in html


def test_a_cluster_without_a_script_says_none_with_the_reason() -> None:
    c = cell("a", "dynamo", 18)
    bad = Record.finished(c, "r", Measurements(), status="export_failed", stage="capture")
    bad = changed(bad, minimal_repro={"reason": "torch.export captured no program"})
    text = render_markdown(build_report(typed_manifest(), [bad]))
    assert "| minimal repro |" in text
    assert "| none |" in text
