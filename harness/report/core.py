"""The human-readable report of a run: `report.md`, `report.html` and `plots/*.png`.

Both documents render one `Document` (verdict, environment, pass matrix, failures grouped
by error signature, export and latency tables, plots, every cell), so they always say the
same thing. The numbers behind the plots come from `harness.report.plots`' pure data functions;
that module imports matplotlib only when it draws. Missing values read "—", never 0.
"""

from __future__ import annotations

import base64
import html
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from harness.report.plots import (
    CLASS_OF_STATUS,
    DEFAULT_THRESHOLD,
    PLOT_TITLES,
    STATUS_CLASSES,
    STATUS_WORD,
    ComparisonData,
    Layout,
    RunLike,
    TrendSeries,
    column_of,
    comparison_data,
    layout,
    opset_differs,
    opset_effect_data,
    pass_rate,
    spread,
    status_word,
    suite_trend_data,
    trend_data,
)
from harness.stats import median
from harness.store.records import Latency, Record
from harness.store.rundir import ARTIFACTS, read_manifest, read_records
from harness.store.status import Status

STATUSES = tuple(Status)

MISSING = "—"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS_DIR = "plots"

STATUS_MARK = {
    "ok": "✅",
    "xfail": "🟡",
    "xpass": "⭐",
    "skipped": "➖",
    "not_attempted": "⬜",
    "export_failed": "❌",
    "checker_failed": "❌",
    "ort_load_failed": "❌",
    "ort_run_failed": "❌",
    "numerics_mismatch": "⚠️",
    "dynamic_mismatch": "⚠️",
    "timeout": "⏱",
    "crashed": "💥",
    "oom": "💥",
    "harness_error": "🛠",
}
# What a matrix mark means, where the status word alone does not say it.
_LEGEND = {
    "xfail": "expected failure",
    "xpass": "expected failure passed: update the expectation",
    "not_attempted": "never ran",
    "export_failed": "export failed (at stage)",
    "checker_failed": "ONNX checker failed",
    "ort_load_failed": "ORT could not load the model",
    "ort_run_failed": "ORT run failed",
    "numerics_mismatch": "outputs differ from eager",
    "dynamic_mismatch": "wrong at the second (dynamic) shape",
    "crashed": "worker crashed",
    "oom": "out of memory",
    "harness_error": "harness error (build/reference)",
}
_NOT_FAILED = ("ok", "xfail", "xpass", "skipped")


# == entry points ==============================================================================


def write_reports(run_dir: Path, *, plots: bool = True, baseline: Path | None = None) -> list[Path]:
    """Write report.md, report.html and (with `plots`) plots/*.png into run_dir.

    With `baseline` (another run dir), add the per-cell latency comparison against it.
    Raises `harness.store.rundir.RunDirError` for a missing or unreadable run dir.
    """
    manifest = read_manifest(run_dir)
    records = unique_cells(read_records(run_dir))
    base = None
    if baseline is not None:
        read_manifest(baseline)
        base = unique_cells(read_records(baseline))
    images: dict[str, Path] = {}
    if plots:
        from harness.report.plots import write_run_plots

        images = write_run_plots(run_dir / PLOTS_DIR, records, baseline=base)
    doc = build_report(manifest, records, images=_relative(images, run_dir), baseline=base)
    return [*_write_documents(doc, run_dir, "report"), *images.values()]


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
        from harness.report.plots import write_trend_plots

        images = write_trend_plots(out_dir / PLOTS_DIR, runs, threshold=threshold)
    doc = build_trend_report(runs, images=_relative(images, out_dir), threshold=threshold)
    return [*_write_documents(doc, out_dir, "trends"), *images.values()]


def unique_cells(records: Iterable[Record]) -> list[Record]:
    """One record per cell (the last one, should a resumed run have written two)."""
    return list(layout(records).cells.values())


def _relative(images: Mapping[str, Path], root: Path) -> dict[str, str]:
    return {name: path.relative_to(root).as_posix() for name, path in images.items()}


def _write_documents(doc: Document, out_dir: Path, stem: str) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    md, page = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    md.write_text(render_markdown(doc), encoding="utf-8")
    page.write_text(render_html(doc, root=out_dir), encoding="utf-8")
    return [md, page]


# == one-line and one-screen summaries =========================================================


def is_failure(record: Record) -> bool:
    return record.status not in _NOT_FAILED


def verdict(records: Sequence[Record]) -> str:
    """'72 cells: 60 ok, 4 xfail, 8 failed (export_failed 5, numerics_mismatch 3)'."""
    if not records:
        return "0 cells: nothing ran"
    counts = Counter(r.status for r in records)
    parts = [f"{counts[s]} {s}" for s in _NOT_FAILED if counts[s] or s == "ok"]
    failed = sorted(
        ((s, n) for s, n in counts.items() if s not in _NOT_FAILED),
        key=lambda sn: (-sn[1], STATUSES.index(sn[0]) if sn[0] in STATUSES else 99),
    )
    if failed:
        detail = ", ".join(f"{s} {n}" for s, n in failed)
        parts.append(f"{sum(n for _, n in failed)} failed ({detail})")
    return f"{len(records)} cells: " + ", ".join(parts)


_SUMMARY_HEADERS = (
    "exporter@opset",
    "cells",
    "ok",
    "failed",
    "xfail",
    "xpass",
    "skipped",
    "export s",
    "speedup",
)


def summary_table(records: Sequence[Record]) -> str:
    """A one-screen plain-text table per exporter/opset, for the end of `harness run`."""
    records = unique_cells(records)
    lay = layout(records)
    by_column: dict[Any, list[Record]] = defaultdict(list)
    for (_, column), r in lay.cells.items():
        by_column[column].append(r)
    rows = [_summary_row(lay.column_label(c), by_column[c]) for c in lay.columns]
    rows.append(_summary_row("all", records))
    return _text_table(_SUMMARY_HEADERS, rows)


def _summary_row(label: str, records: Sequence[Record]) -> tuple[str, ...]:
    counts = Counter(r.status for r in records)
    export_s = _median([r.export_s for r in records])
    speedup = _median([r.speedup for r in records])
    return (
        label,
        str(len(records)),
        str(counts["ok"]),
        str(sum(is_failure(r) for r in records)),
        str(counts["xfail"]),
        str(counts["xpass"]),
        str(counts["skipped"]),
        fmt(export_s),
        fmt(speedup, "×"),
    )


def _text_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(line[i]) for line in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows[:-1]), rule, line(rows[-1])])


# == number formatting =========================================================================


def fmt(value: float | None, unit: str = "") -> str:
    """Three significant figures or so; None is '—' (missing), never 0."""
    if value is None:
        return MISSING
    magnitude = abs(value)
    if magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 0.1 or magnitude == 0:
        text = f"{value:.2f}"
    else:
        text = f"{value:.2g}"
    return text + unit


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def latency_text(latency: Latency | None) -> str:
    """'1.52 (1.48–1.60)': p50 and p10–p90 of the raw samples (p90 only without samples)."""
    s = spread(latency)
    if latency is None or s is None:
        return MISSING
    if not latency.samples:
        return f"{fmt(latency.p50)} (p90 {fmt(latency.p90)})"
    return f"{fmt(s.p50)} ({fmt(s.p10)}–{fmt(s.p90)})"


# == the document model: built once, rendered to markdown and to HTML ============================


@dataclass(frozen=True)
class Text:
    """A piece of text: a table cell, a fact's value."""

    text: str
    status: str | None = None  # colours a table cell in HTML
    link: str | None = None  # relative to the report
    title: str | None = None  # hover text in HTML
    code: bool = False


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[Text, ...], ...]
    folded: str | None = None  # a summary line: the table starts folded
    row_ids: tuple[str, ...] | None = None  # HTML anchors


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Facts:
    items: tuple[tuple[str, Text], ...]


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Image:
    title: str
    path: str  # relative to the report


@dataclass(frozen=True)
class Legend:
    """What the status marks mean: a line in markdown, coloured swatches in HTML."""

    entries: tuple[Text, ...]  # text: mark and word; title: what it means
    note: str | None = None


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Block, ...]
    code_title: str | None = None  # shown after the title as code (an error signature)


Block = Paragraph | Facts | Table | Code | Image | Legend | Section


@dataclass(frozen=True)
class Document:
    verdict: str
    heading: str
    sections: tuple[Section, ...]


# == the run report ============================================================================


def build_report(
    manifest: Mapping[str, Any],
    records: Sequence[Record],
    *,
    images: Mapping[str, str] | None = None,
    baseline: Sequence[Record] | None = None,
) -> Document:
    images = images or {}
    lay = layout(records)
    sections = [
        environment_section(manifest),
        matrix_section(lay, images),
        failures_section(records),
        expectations_section(records),
        export_section(lay, images),
        latency_section(lay, images),
        opsets_section(records, images),
        comparison_section(baseline, records, images) if baseline is not None else None,
        cells_section(lay),
    ]
    heading = f"Run {manifest.get('run_id') or '?'}"
    if manifest.get("suite"):
        heading += f" — suite {manifest['suite']}"
    return Document(verdict(records), heading, tuple(s for s in sections if s is not None))


def _image(name: str, images: Mapping[str, str]) -> tuple[Image, ...]:
    return (Image(PLOT_TITLES[name], images[name]),) if name in images else ()


# -- environment ---------------------------------------------------------------------------------


def environment_section(manifest: Mapping[str, Any]) -> Section:
    return Section("Environment", (Facts(tuple(environment_facts(manifest))),))


def environment_facts(m: Mapping[str, Any]) -> list[tuple[str, Text]]:
    harness = m.get("harness") or {}
    versions = m.get("versions") or {}
    items: list[tuple[str, Any]] = [
        ("run", m.get("run_id")),
        ("suite", m.get("suite")),
        ("started", m.get("started")),
        ("finished", m.get("finished") or f"{MISSING} (unfinished)"),
        ("duration", _duration(m.get("started"), m.get("finished"))),
        (
            "harness",
            " ".join(str(v) for v in (harness.get("version"), harness.get("git_sha")) if v),
        ),
        *((_versions_key(variant), _joined(v, " ")) for variant, v in versions.items()),
        ("hardware", _hardware(m.get("hardware") or {})),
        ("settings", _joined(_flatten(m.get("settings") or {}), "=")),
        ("matrix", m.get("matrix")),
    ]
    facts = [(k, Text(str(v))) for k, v in items if v not in (None, "")]
    command = " ".join(str(a) for a in m.get("command") or [])
    if command:
        facts.insert(5, ("command", Text(command, code=True)))
    for problem in m.get("zoo_problems") or []:
        # a zoo file that did not import: its models are missing from the matrix
        facts.append(
            ("zoo problem", Text(f"{problem.get('source')}: {problem.get('error')}", code=True))
        )
    return facts


def _versions_key(variant: str) -> str:
    return "versions" if variant == "base" else f"versions [{variant}]"


def _joined(values: Any, sep: str) -> str:
    if not isinstance(values, Mapping):
        return str(values)
    return " · ".join(f"{k}{sep}{v if v is not None else MISSING}" for k, v in values.items())


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _hardware(hw: Mapping[str, Any]) -> str:
    parts = [str(hw["cpu"])] if hw.get("cpu") else []
    if hw.get("cores") is not None:
        parts.append(f"{hw['cores']} cores")
    if hw.get("memory_gb") is not None:
        parts.append(f"{fmt(hw['memory_gb'])} GB RAM")
    gpus = hw.get("gpus") or []
    names = [g.get("name", str(g)) if isinstance(g, Mapping) else str(g) for g in gpus]
    parts.append("GPUs: " + ", ".join(names) if names else "no GPU")
    return ", ".join(parts) if hw else ""


def _duration(started: Any, finished: Any) -> str | None:
    try:
        seconds = (
            datetime.fromisoformat(finished) - datetime.fromisoformat(started)
        ).total_seconds()
    except (TypeError, ValueError):
        return None
    minutes, secs = divmod(round(seconds), 60)
    return (
        f"{minutes // 60}h {minutes % 60:02d}m {secs:02d}s"
        if minutes >= 60
        else f"{minutes}m {secs:02d}s"
    )


# -- pass matrix -----------------------------------------------------------------------------------


def status_text(record: Record) -> str:
    """'✅ ok', '❌ export (translate)', '🟡 xfail (capture) 18≠17'."""
    text = f"{STATUS_MARK.get(record.status, '?')} {status_word(record)}"
    if opset_differs(record):
        text += f" {record.opset_actual}≠{record.opset}"
    return text


def _status_cell(record: Record | None) -> Text:
    if record is None:
        return Text("")
    hover = record.error_signature or record.reason
    return Text(status_text(record), status=record.status, title=hover)


def in_layout_order(lay: Layout) -> list[Record]:
    """The records row by row (model, shape), then column by column (exporter@opset)."""
    cells = ((lay.record(row, col) for col in lay.columns) for row in lay.rows)
    return [r for line in cells for r in line if r is not None]


def grid_table(lay: Layout, cell: Callable[[Record], Text]) -> Table:
    """Rows: model (shape); columns: exporter@opset; an absent cell is blank."""
    rows = tuple(
        (Text(lay.row_label(row)), *(_maybe(lay.record(row, col), cell) for col in lay.columns))
        for row in lay.rows
    )
    return Table(("model", *(lay.column_label(c) for c in lay.columns)), rows)


def _maybe(record: Record | None, cell: Callable[[Record], Text]) -> Text:
    return Text("") if record is None else cell(record)


def legend(records: Iterable[Record]) -> Legend | None:
    records = list(records)
    present = {r.status for r in records}
    entries = tuple(
        Text(f"{STATUS_MARK[s]} {STATUS_WORD[s]}", status=s, title=_LEGEND.get(s))
        for s in STATUSES
        if s in present
    )
    note = None
    if any(opset_differs(r) for r in records):
        note = "18≠17: the saved model's opset (18) differs from the requested one (17)"
    return Legend(entries, note) if entries else None


def matrix_section(lay: Layout, images: Mapping[str, str]) -> Section:
    table = grid_table(lay, _status_cell)
    key = legend(lay.cells.values())
    blocks: tuple[Block, ...] = (table, *((key,) if key else ()), *_image("matrix", images))
    return Section("Pass matrix", blocks)


# -- failures --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FailureGroup:
    """Failed cells that share an error signature (one cause, usually)."""

    signature: str
    records: tuple[Record, ...]

    @property
    def statuses(self) -> list[str]:
        return list(dict.fromkeys(r.status for r in self.records))

    def excerpt(self, limit: int = 600) -> str:
        message = next((r.error_message for r in self.records if r.error_message), None)
        if not message:
            return self.signature
        first = next(r for r in self.records if r.error_message)
        text = f"{first.error_type}: {message}" if first.error_type else message
        return text if len(text) <= limit else text[:limit] + " …"


def failure_groups(records: Iterable[Record]) -> list[FailureGroup]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if is_failure(r):
            groups[r.error_signature or r.status].append(r)
    return sorted(
        (FailureGroup(sig, tuple(sorted(rs, key=lambda r: r.cell))) for sig, rs in groups.items()),
        key=lambda g: (-len(g.records), g.signature),
    )


def artifacts_link(record: Record) -> Text:
    """A link to the cell's artifacts folder, or '—' when it left none."""
    if not record.artifacts:
        return Text(MISSING)
    parents = {Path(p).parent.as_posix() for p in record.artifacts.values()}
    folder = parents.pop() if len(parents) == 1 else f"{ARTIFACTS}/{record.cell.cell_id}"
    folder = folder.rstrip("/") + "/"
    return Text(folder, link=folder, title=", ".join(sorted(record.artifacts)))


def _failure_section(group: FailureGroup) -> Section:
    rows = tuple(
        (
            Text(r.cell.label()),
            Text(r.status, status=r.status),
            Text(r.stage or MISSING),
            artifacts_link(r),
        )
        for r in group.records
    )
    n = len(group.records)
    title = f"{n} cell{'s' if n != 1 else ''} — {', '.join(group.statuses)}:"
    table = Table(("cell", "status", "stage", "artifacts"), rows)
    return Section(title, (table, Code(group.excerpt())), code_title=group.signature)


def failures_section(records: Sequence[Record]) -> Section:
    groups = failure_groups(records)
    if not groups:
        return Section("Failures", (Paragraph("No failures."),))
    n = sum(len(g.records) for g in groups)
    intro = Paragraph(
        f"{n} failed cells in {len(groups)} groups by error signature, largest first."
    )
    return Section("Failures", (intro, *(_failure_section(g) for g in groups)))


def expectations_section(records: Sequence[Record]) -> Section | None:
    marked = [r for r in records if r.status in ("xfail", "xpass")]
    if not marked:
        return None
    rows = tuple(
        (
            Text(r.cell.label()),
            Text(status_text(r), status=r.status),
            Text(r.reason or r.error_signature or MISSING),
        )
        for r in sorted(marked, key=lambda r: (r.status, r.cell))
    )
    note = Paragraph("⭐ xpass: the cell was expected to fail and passed; update its expectation.")
    return Section("Expected failures", (Table(("cell", "status", "reason"), rows), note))


# -- export and latency tables ---------------------------------------------------------------------

_PHASE_ORDER = ("capture", "translate", "optimize", "save")


def _phases_text(record: Record) -> str | None:
    if not record.export_phases:
        return None
    return ", ".join(f"{k} {fmt(v)}" for k, v in record.export_phases.items())


def phases_table(lay: Layout) -> Table | None:
    timed = [r for r in in_layout_order(lay) if r.export_phases]
    if not timed:
        return None
    seen = {name for r in timed for name in r.export_phases or {}}
    names = [p for p in _PHASE_ORDER if p in seen] + sorted(seen - set(_PHASE_ORDER))
    rows = tuple(
        (
            Text(lay.row_label((r.model, r.dynamic))),
            Text(lay.column_label(column_of(r))),
            Text(fmt(r.export_s)),
            *(Text(fmt((r.export_phases or {}).get(p))) for p in names),
        )
        for r in timed
    )
    return Table(("model", "exporter@opset", "total", *names), rows)


def _sub(title: str, *blocks: Block | None) -> Section:
    return Section(title, tuple(b for b in blocks if b is not None))


def export_section(lay: Layout, images: Mapping[str, str]) -> Section:
    records = list(lay.cells.values())
    subs = [
        _sub(
            "Export time (s)",
            grid_table(lay, lambda r: Text(fmt(r.export_s), title=_phases_text(r))),
        ),
        _sub("Export phases (s)", phases_table(lay)),
        _sub(
            "Export peak memory (MiB, RSS above baseline)",
            grid_table(lay, lambda r: Text(fmt(r.export_peak_rss_mb))),
        ),
    ]
    if any(r.export_peak_cuda_mb is not None for r in records):
        subs.append(
            _sub(
                "Export peak CUDA memory (MiB)",
                grid_table(lay, lambda r: Text(fmt(r.export_peak_cuda_mb))),
            )
        )
    return Section("Export", (*(s for s in subs if s.blocks), *_image("export_cost", images)))


def latency_section(lay: Layout, images: Mapping[str, str]) -> Section:
    return Section(
        "Latency",
        (
            _sub(
                "ORT latency p50 (ms, p10–p90)",
                grid_table(lay, lambda r: Text(latency_text(r.ort_latency_ms))),
            ),
            _sub(
                "Eager latency p50 (ms, p10–p90)",
                grid_table(lay, lambda r: Text(latency_text(r.eager_latency_ms))),
            ),
            _sub(
                "Speedup (eager p50 / ORT p50)",
                grid_table(lay, lambda r: Text(fmt(r.speedup, "×"))),
            ),
            *_image("latency", images),
        ),
    )


# -- opsets, coverage, comparison -------------------------------------------------------------------


def opsets_section(records: Sequence[Record], images: Mapping[str, str]) -> Section:
    rows = tuple(
        (
            Text(s.series),
            Text(str(opset)),
            Text(str(cells)),
            Text(fmt(rate, "%")),
            Text(fmt(rel, "×")),
        )
        for s in opset_effect_data(records).series
        for opset, cells, rate, rel in zip(
            s.opsets, s.cells, s.pass_rate, s.relative_latency, strict=True
        )
    )
    headers = (
        "exporter",
        "opset",
        "cells",
        "work (% of attempted)",
        "ORT p50 vs lowest opset (median)",
    )
    blocks: list[Block] = [Table(headers, rows), *_image("opset_effect", images)]
    coverage = coverage_table(records)
    if coverage is not None:
        blocks += [_sub("ATen op coverage", coverage, *_image("coverage", images))]
    return Section("Opsets and op coverage", tuple(blocks))


def coverage_table(records: Sequence[Record]) -> Table | None:
    """Op coverage per exporter and opset (harness.coverage.matrix), when the run has op data:
    from op cells (the ops suite) or from the models' ATen inventories."""
    from harness.coverage import matrix as coverage

    usage = coverage.op_usage() if any(r.family == coverage.OPS_FAMILY for r in records) else None
    cov = coverage.build_coverage(records, usage=usage)
    if cov.is_empty:
        return None
    rows = tuple(
        (
            Text(s.column.label),
            Text(str(s.ops)),
            *(Text(str(s.counts[state])) for state in coverage.STATES),
            Text(_percent(s.covered_share)),
            Text(_percent(s.weighted_share)),
        )
        for s in cov.summaries()
    )
    states = tuple(coverage.STATE_TEXT[state] for state in coverage.STATES)
    return Table(("exporter@opset", "ops", *states, "covered", "weighted by model usage"), rows)


def _percent(share: float | None) -> str:
    return MISSING if share is None else f"{share:.0%}"


def comparison_section(
    baseline: Sequence[Record], records: Sequence[Record], images: Mapping[str, str]
) -> Section:
    data = comparison_data(baseline, records)
    counts = Counter(p.verdict for p in data.points)
    summary = Paragraph(
        f"{len(data.points)} cells timed in both runs: {counts['regression']} slower and "
        f"{counts['improvement']} faster than ±{data.threshold:.0%}; "
        f"{len(data.unmatched)} cells not timed in both."
    )
    title = f"Latency against baseline {data.baseline_run}"
    return _sub(title, summary, _moved_table(data), *_image("comparison", images))


def _moved_table(data: ComparisonData) -> Table | None:
    """The cells whose ORT p50 moved beyond the band, worst first."""
    rows = tuple(
        (
            Text(p.cell),
            Text(fmt(p.baseline_ms)),
            Text(fmt(p.candidate_ms)),
            Text(fmt(p.ratio, "×")),
            Text(p.verdict),
        )
        for p in data.points
        if p.verdict != "within"
    )
    headers = ("cell", "baseline p50 ms", "candidate p50 ms", "ratio", "verdict")
    return Table(headers, rows) if rows else None


# -- every cell --------------------------------------------------------------------------------------

_CELL_HEADERS = (
    "model", "exporter", "opset", "saved opset", "device", "shape", "variant", "status", "stage",
    "export s", "peak MiB", "ORT p50 ms", "eager p50 ms", "speedup", "artifacts",
)  # fmt: skip


def _cell_row(r: Record) -> tuple[Text, ...]:
    return (
        Text(r.model),
        Text(r.exporter),
        Text(str(r.opset)),
        Text(str(r.opset_actual) if r.opset_actual is not None else MISSING),
        Text(r.device),
        Text("dynamic" if r.dynamic else "static"),
        Text(r.variant),
        Text(status_text(r), status=r.status, title=r.error_signature or r.reason),
        Text(r.stage or MISSING),
        Text(fmt(r.export_s)),
        Text(fmt(r.export_peak_rss_mb)),
        Text(fmt(r.ort_latency_ms.p50 if r.ort_latency_ms else None)),
        Text(fmt(r.eager_latency_ms.p50 if r.eager_latency_ms else None)),
        Text(fmt(r.speedup, "×")),
        artifacts_link(r),
    )


def cells_section(lay: Layout) -> Section:
    records = in_layout_order(lay)
    table = Table(
        _CELL_HEADERS,
        tuple(_cell_row(r) for r in records),
        folded=f"{len(records)} cells, one row each",
        row_ids=tuple(f"cell-{r.cell.cell_id}" for r in records),
    )
    return Section("All cells", (table,))


# == the trend report ==========================================================================


def build_trend_report(
    runs: Sequence[RunLike],
    *,
    images: Mapping[str, str] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> Document:
    images = images or {}
    if not runs:
        return Document("0 runs in the history", "Trends over the run history", ())
    trends = trend_data(runs, threshold=threshold, max_series=10**9)
    recent = [s for s in trends.series if any(s.regression[-trends.window :])]
    latest = sum(s.regression[-1] for s in trends.series)
    head = (
        f"{len(runs)} runs from {trends.runs[0]} to {trends.runs[-1]}: of {trends.total_series} cells, "
        f"{latest} slower than their recent median +{threshold:.0%} in the latest run, "
        f"{len(recent)} in the last {trends.window} runs"
    )
    flagged = _sub(
        f"Cells flagged slower in the last {trends.window} runs",
        Paragraph(
            f"A run is flagged when its ORT p50 exceeds the median of the previous {trends.window} "
            f"runs by more than {threshold:.0%}; a lasting step stops being flagged once it fills that window."
        ),
        _flagged_table(recent, trends.runs, trends.window) if recent else Paragraph("None."),
        *_image("trends", images),
    )
    sections = (_sub("Runs", _runs_table(runs), *_image("suite_trend", images)), flagged)
    return Document(head, "Trends over the run history", sections)


def _flagged_table(series: Sequence[TrendSeries], runs: Sequence[str], window: int) -> Table:
    rows = []
    for s in series:
        first = len(runs) - window + s.regression[-window:].index(True)
        first = max(first, s.regression.index(True))
        flagged = [
            runs[i] for i, flag in enumerate(s.regression) if flag and i >= len(runs) - window
        ]
        rows.append(
            (
                Text(s.cell),
                Text(", ".join(flagged)),
                Text(fmt(s.baseline[first])),
                Text(fmt(s.median[-1])),
                Text(fmt(_ratio(s.median[-1], s.baseline[first]), "×")),
            )
        )
    headers = ("cell", "flagged runs", "p50 before (ms)", "latest p50 (ms)", "latest / before")
    return Table(headers, tuple(rows))


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _runs_table(runs: Sequence[RunLike]) -> Table:
    suite = suite_trend_data(runs)
    rows = tuple(
        (
            Text(run.run_id),
            Text(label),
            *(
                Text(
                    str(((run.manifest.get("versions") or {}).get("base") or {}).get(k) or MISSING)
                )
                for k in ("torch", "onnxscript", "onnxruntime")
            ),
            Text(fmt(pass_rate(run.records), "%")),
            Text(fmt(speedup, "×")),
        )
        for run, label, speedup in zip(runs, suite.runs, suite.geomean_speedup, strict=True)
    )
    return Table(
        ("run", "date", "torch", "onnxscript", "onnxruntime", "work", "geomean speedup"), rows
    )


# == rendering: markdown =======================================================================


def render_markdown(doc: Document) -> str:
    lines = [doc.verdict, "", f"# {doc.heading}", ""]
    for section in doc.sections:
        lines += _md_section(section, 2)
    return "\n".join(lines).rstrip() + "\n"


def _md_section(section: Section, level: int) -> list[str]:
    title = section.title
    if section.code_title:
        title += " " + _md_code(section.code_title)
    lines = ["#" * min(level, 6) + " " + title, ""]
    for block in section.blocks:
        lines += _md_block(block, level)
    return lines


def _md_block(block: Block, level: int) -> list[str]:
    if isinstance(block, Section):
        return _md_section(block, level + 1)
    if isinstance(block, Paragraph):
        return [block.text, ""]
    if isinstance(block, Facts):
        return [f"- **{key}**: {_md_text(value)}" for key, value in block.items] + [""]
    if isinstance(block, Code):
        fence = "~~~~" if "```" in block.text else "```"
        return [fence, block.text, fence, ""]
    if isinstance(block, Image):
        return [f"![{block.title}]({block.path})", ""]
    if isinstance(block, Legend):
        return [_md_legend(block), ""]
    return _md_table(block)


def _md_legend(key: Legend) -> str:
    entries = [e.text + (f" = {e.title}" if e.title else "") for e in key.entries]
    return "Legend: " + " · ".join([*entries, *([key.note] if key.note else [])])


def _md_table(table: Table) -> list[str]:
    lines = [
        "| " + " | ".join(table.headers) + " |",
        "|" + "|".join("---" for _ in table.headers) + "|",
        *("| " + " | ".join(_md_text(cell) for cell in row) + " |" for row in table.rows),
        "",
    ]
    if table.folded:
        return [
            "<details>",
            f"<summary>{html.escape(table.folded)}</summary>",
            "",
            *lines,
            "</details>",
            "",
        ]
    return lines


def _md_text(t: Text) -> str:
    text = t.text.replace("|", "\\|").replace("\n", " ")
    if t.code:
        text = _md_code(text)
    return f"[{text}]({t.link})" if t.link else text


def _md_code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"


# == rendering: HTML ===========================================================================


def _status_css() -> str:
    rules = [
        f".s-{name} {{ background: {c.colour}; color: {c.text_colour}; }}"
        for name, c in STATUS_CLASSES.items()
    ]
    return "\n".join(rules)


_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #222; }
.verdict { font-size: 1.25em; font-weight: 600; padding: .5em .8em; background: #f3f3f3;
           border-left: 6px solid #0072B2; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.6em; }
h3, h4 { margin-bottom: .4em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; position: sticky; top: 0; }
td a { color: inherit; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; white-space: pre-wrap; font-size: 12px; }
code { font-size: 12px; }
ul.facts { list-style: none; padding-left: 0; } ul.facts b { display: inline-block; min-width: 7em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 12px; }
.legend { line-height: 2; } .key { padding: 2px 6px; border-radius: 3px; margin-left: .6em; }
"""


def render_html(doc: Document, *, root: Path) -> str:
    """A self-contained page: inline CSS, images as data URIs, no scripts, no network."""
    body = [
        f'<p class="verdict">{html.escape(doc.verdict)}</p>',
        f"<h1>{html.escape(doc.heading)}</h1>",
    ]
    for section in doc.sections:
        body += _html_section(section, 2, root)
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(doc.verdict)}</title>\n<style>{_CSS}{_status_css()}\n</style>\n</head>\n<body>\n"
    )
    return head + "\n".join(body) + "\n</body>\n</html>\n"


def _html_section(section: Section, level: int, root: Path) -> list[str]:
    h = min(level, 6)
    title = html.escape(section.title)
    if section.code_title:
        title += f" <code>{html.escape(section.code_title)}</code>"
    out = [f"<h{h}>{title}</h{h}>"]
    for block in section.blocks:
        out += _html_block(block, level, root)
    return out


def _html_block(block: Block, level: int, root: Path) -> list[str]:
    if isinstance(block, Section):
        return _html_section(block, level + 1, root)
    if isinstance(block, Paragraph):
        return [f"<p>{html.escape(block.text)}</p>"]
    if isinstance(block, Facts):
        items = "".join(f"<li><b>{html.escape(k)}</b> {_html_text(v)}</li>" for k, v in block.items)
        return [f'<ul class="facts">{items}</ul>']
    if isinstance(block, Code):
        return [f"<pre>{html.escape(block.text)}</pre>"]
    if isinstance(block, Image):
        return [_html_image(block, root)]
    if isinstance(block, Legend):
        return [_html_legend(block)]
    return [_html_table(block)]


def _html_legend(key: Legend) -> str:
    swatches = " ".join(
        f'<span class="key s-{CLASS_OF_STATUS.get(e.status or "", "crashed")}">{html.escape(e.text)}</span>'
        + (f" {html.escape(e.title)}" if e.title else "")
        for e in key.entries
    )
    note = f"<br>{html.escape(key.note)}" if key.note else ""
    return f'<p class="legend">Legend: {swatches}{note}</p>'


def _html_image(image: Image, root: Path) -> str:
    data = base64.b64encode((root / image.path).read_bytes()).decode("ascii")
    title = html.escape(image.title)
    return f'<figure><img alt="{title}" src="data:image/png;base64,{data}"><figcaption>{title}</figcaption></figure>'


def _html_table(table: Table) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in table.headers)
    ids = table.row_ids or ("",) * len(table.rows)
    rows = "\n".join(
        (f'<tr id="{html.escape(i)}">' if i else "<tr>")
        + "".join(_html_cell(c) for c in row)
        + "</tr>"
        for i, row in zip(ids, table.rows, strict=True)
    )
    out = f'<div class="scroll"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table></div>'
    if table.folded:
        return f"<details><summary>{html.escape(table.folded)}</summary>\n{out}\n</details>"
    return out


def _html_cell(t: Text) -> str:
    attrs = ""
    if t.status:
        attrs += f' class="s-{CLASS_OF_STATUS.get(t.status, "crashed")}"'
    if t.title:
        attrs += f' title="{html.escape(t.title)}"'
    return f"<td{attrs}>{_html_text(t)}</td>"


def _html_text(t: Text) -> str:
    text = html.escape(t.text).replace("\n", "<br>")
    if t.code:
        text = f"<code>{text}</code>"
    if t.link:
        text = f'<a href="{html.escape(t.link)}">{text}</a>'
    return text
