"""The human-readable report of a run: `report.md`, `report.html` and `plots/*.png`, and the
trend report of the run history.

A report is one `Document` (document.py), built once from the records and rendered by
markdown.py and html.py, so both say the same thing. `build_report` below lists its
sections: outcomes.py says how the cells ended, measures.py what they measured, on the
grid of layout.py. plots.py (the only module that imports matplotlib) draws the numbers
of data.py and trends.py in the colours of palette.py. Missing values read "—", never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.report.data import DEFAULT_THRESHOLD, PLOT_TITLES
from harness.report.document import Document, Image
from harness.report.environment import environment_section
from harness.report.generation import generation_section, patches_section
from harness.report.hf import hf_section, workarounds_section
from harness.report.html import render_html
from harness.report.layout import layout, unique_cells
from harness.report.markdown import render_markdown
from harness.report.measures import (
    cells_section,
    comparison_section,
    export_section,
    latency_section,
    opsets_section,
)
from harness.report.ort_opt import ort_opt_section
from harness.report.outcomes import (
    expectations_section,
    failures_section,
    matrix_section,
    skipped_section,
    summary_section,
    summary_table,
    verdict,
)
from harness.report.precision import precision_section
from harness.report.real_size import real_size_section
from harness.report.tasks import tasks_section
from harness.report.tokens import tokens_section
from harness.report.trend_report import build_trend_report
from harness.report.trends import RunLike
from harness.report.ways import ways_section
from harness.store.files import folder_inside, write_inside
from harness.store.manifest import Manifest
from harness.store.records import Record
from harness.store.rundir import read_manifest, read_records

__all__ = [
    "build_report",
    "build_trend_report",
    "summary_table",
    "unique_cells",
    "verdict",
    "write_reports",
    "write_trend_report",
]

REPORT = "report"
TRENDS = "trends"
PLOTS_DIR = "plots"


def write_reports(run_dir: Path, *, plots: bool = True, baseline: Path | None = None) -> list[Path]:
    """Write report.md, report.html and (with `plots`) plots/*.png into run_dir.

    With `baseline` (another run dir), add the per-cell latency comparison against it.
    Raises `harness.store.rundir.RunDirError` for a missing or unreadable run dir, or an
    output path that is a symlink or leads out of it.
    """
    manifest = read_manifest(run_dir)
    records = unique_cells(read_records(run_dir))
    base = None
    if baseline is not None:
        read_manifest(baseline)
        base = unique_cells(read_records(baseline))
    images: dict[str, Path] = {}
    if plots:
        from harness.report.plots import write_run_plots  # imports matplotlib

        images = write_run_plots(folder_inside(run_dir, PLOTS_DIR), records, baseline=base)
    doc = build_report(manifest, records, images=_relative(images, run_dir), baseline=base)
    return [*_write_documents(doc, run_dir, REPORT), *images.values()]


def write_trend_report(
    runs: Sequence[RunLike],
    out_dir: Path,
    *,
    plots: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[Path]:
    """Write trends.md, trends.html and plots/trends.png, plots/suite_trend.png into out_dir."""
    images: dict[str, Path] = {}
    if plots and runs:
        from harness.report.plots import write_trend_plots  # imports matplotlib

        images = write_trend_plots(folder_inside(out_dir, PLOTS_DIR), runs, threshold=threshold)
    doc = build_trend_report(runs, images=_relative(images, out_dir), threshold=threshold)
    return [*_write_documents(doc, out_dir, TRENDS), *images.values()]


def build_report(
    manifest: Manifest,
    records: Sequence[Record],
    *,
    images: Mapping[str, str] | None = None,
    baseline: Sequence[Record] | None = None,
) -> Document:
    """The run report: the counts first, then how cells ended, then what they measured."""
    figure = {name: Image(PLOT_TITLES[name], path) for name, path in (images or {}).items()}
    lay = layout(records)
    sections = [
        summary_section(records),
        environment_section(manifest),
        matrix_section(lay, figure.get("matrix")),
        patches_section(records),
        failures_section(records),
        expectations_section(records),
        skipped_section(records),
        export_section(lay, figure.get("export_cost"), manifest),
        latency_section(lay, figure.get("latency")),
        real_size_section(records),
        generation_section(records, figure.get("generation_latency")),
        precision_section(records),
        ort_opt_section(records),
        tasks_section(records),
        hf_section(records),
        workarounds_section(records),
        tokens_section(records),
        ways_section(records),
        opsets_section(records, figure.get("opset_effect"), figure.get("coverage")),
        comparison_section(baseline, records, figure.get("comparison"))
        if baseline is not None
        else None,
        cells_section(lay),
    ]
    heading = f"Run {manifest.run_id or '?'}"
    if manifest.suite:
        heading += f" — suite {manifest.suite}"
    return Document(verdict(records), heading, tuple(s for s in sections if s is not None))


def _relative(images: Mapping[str, Path], root: Path) -> dict[str, str]:
    return {name: path.relative_to(root).as_posix() for name, path in images.items()}


def _write_documents(doc: Document, out_dir: Path, stem: str) -> list[Path]:
    """report.md and report.html, each written beside itself and replaced into place: never
    through a symlink (harness.store.files; UnsafePath, a RunDirError, where one is)."""
    return [
        write_inside(out_dir, f"{stem}.md", render_markdown(doc)),
        write_inside(out_dir, f"{stem}.html", render_html(doc, root=out_dir)),
    ]
