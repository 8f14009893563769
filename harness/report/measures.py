"""What a run measured: the report's export, latency, opset and op coverage sections, the
latency against a baseline run, and every cell with its numbers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harness.coverage import matrix as coverage
from harness.coverage.render import samples_text
from harness.report.data import (
    ComparisonData,
    comparison_data,
    median_or_none,
    opset_effect_data,
    run_coverage,
    spread,
)
from harness.report.document import (
    MISSING,
    Image,
    Paragraph,
    Section,
    Table,
    Text,
    fmt,
    percent,
    sub,
    table,
)
from harness.report.layout import Layout, column_of
from harness.report.outcomes import artifacts_link, grid_table, status_cell
from harness.stats import PERCENTILE_MIN_SAMPLES
from harness.store.manifest import ColdStart, Manifest
from harness.store.records import Latency, Record
from harness.store.status import Stage

# == export ====================================================================================


def _phases_text(record: Record) -> str | None:
    if not record.export.phases:
        return None
    return ", ".join(f"{k} {fmt(v)}" for k, v in record.export.phases.items())


def phases_table(lay: Layout) -> Table | None:
    timed = [r for r in lay.in_order() if r.export.phases]
    if not timed:
        return None
    seen = {name for r in timed for name in r.export.phases or {}}
    order = [s.value for s in Stage if s.is_export]
    names = [p for p in order if p in seen] + sorted(seen - set(order))
    rows = [
        (
            Text(lay.row_label((r.model, r.dynamic))),
            Text(lay.column_label(column_of(r))),
            Text(fmt(r.export.seconds)),
            *(Text(fmt((r.export.phases or {}).get(p))) for p in names),
        )
        for r in timed
    ]
    return table(("model", "exporter@opset", "total", *names), rows)


def export_section(lay: Layout, image: Image | None, manifest: Manifest | None = None) -> Section:
    records = list(lay.cells.values())
    subs = [
        sub("Exporter cold start (first export in a worker process)", cold_start_table(manifest)),
        sub(
            "Export time (s)",
            grid_table(lay, lambda r: Text(fmt(r.export.seconds), title=_phases_text(r))),
        ),
        sub("Export phases (s)", phases_table(lay)),
        sub(
            "Export peak memory (MiB, RSS above baseline)",
            grid_table(lay, lambda r: Text(fmt(r.export.peak_rss_mb))),
        ),
    ]
    if any(r.export.peak_cuda_mb is not None for r in records):
        subs.append(
            sub(
                "Export peak CUDA memory (MiB)",
                grid_table(lay, lambda r: Text(fmt(r.export.peak_cuda_mb))),
            )
        )
    return sub("Export", *(s for s in subs if s.blocks), image)


def cold_start_table(manifest: Manifest | None) -> Table | None:
    """Per exporter and variant: the worker processes that measured it, and the median (and
    range) of their first export's wall time, CPU time and peak memory. The per-cell figures
    above are taken after each worker's warm-up; these are what a fresh process pays once."""
    groups: dict[tuple[str, str], list[ColdStart]] = {}
    for entry in manifest.cold_start if manifest else ():
        groups.setdefault((entry.exporter_name, entry.variant_name), []).append(entry)
    if not groups:
        return None
    rows = [
        _cold_start_row(exporter, variant, entries)
        for (exporter, variant), entries in sorted(groups.items())
    ]
    header = ("exporter", "variant", "processes", "time (s)", "CPU time (s)", "peak memory (MiB)")
    return table(header, rows)


def _cold_start_row(exporter: str, variant: str, entries: list[ColdStart]) -> tuple[Text, ...]:
    def spread(key: str) -> str:
        values = sorted(float(v) for e in entries if (v := getattr(e, key)) is not None)
        if not values:
            return MISSING
        middle = fmt(median_or_none(values))
        return middle if len(values) == 1 else f"{middle} ({fmt(values[0])}–{fmt(values[-1])})"

    failed = sum(1 for e in entries if e.error)
    processes = str(len(entries)) + (f" ({failed} failed)" if failed else "")
    figures = (spread(key) for key in ("seconds", "cpu_seconds", "peak_rss_mb"))
    return tuple(Text(v) for v in (exporter, variant, processes, *figures))


# == latency ===================================================================================


def latency_text(latency: Latency | None) -> str:
    """'1.52 (1.48–1.60)': p50 and p10–p90 of the raw samples (p90 only without samples);
    from fewer samples than a p90 needs, p50 with the median's 95% interval and the count
    ('2,350 (95% CI 2,310–2,400, n=7)'), never a p10–p90 of a handful."""
    s = spread(latency)
    if latency is None or s is None:
        return MISSING
    if not latency.samples:
        return f"{fmt(latency.p50)} (p90 {fmt(latency.p90)})"
    if len(latency.samples) >= PERCENTILE_MIN_SAMPLES[90]:
        return f"{fmt(s.p50)} ({fmt(s.p10)}–{fmt(s.p90)}){_unsteady(latency)}"
    if latency.ci_low is None or latency.ci_high is None:
        return f"{fmt(latency.p50)} (n={len(latency.samples)}, too few for an interval)"
    interval = f"{fmt(latency.ci_low)}–{fmt(latency.ci_high)}"
    return f"{fmt(latency.p50)} (95% CI {interval}, n={len(latency.samples)}){_unsteady(latency)}"


UNSTEADY = 0.25  # a median known no better than +-25%: the machine moved under its loop


def _unsteady(latency: Latency) -> str:
    """' unsteady (median +-60%)' where the median's 95% interval is that wide."""
    low, high, p50 = latency.ci_low, latency.ci_high, latency.p50
    if low is None or high is None or not p50:
        return ""
    half = (high - low) / 2 / p50
    return f" unsteady (median ±{half:.0%})" if half > UNSTEADY else ""


def latency_section(lay: Layout, image: Image | None) -> Section:
    return sub(
        "Latency",
        sub(
            "ORT latency p50 (ms, p10–p90)",
            grid_table(lay, lambda r: Text(latency_text(r.ort.latency))),
        ),
        sub(
            "Eager latency p50 (ms, p10–p90)",
            grid_table(lay, lambda r: Text(latency_text(r.eager.latency))),
        ),
        sub(
            "Speedup (eager p50 / ORT p50)",
            grid_table(lay, lambda r: Text(fmt(r.speedup, "×"))),
        ),
        image,
    )


# == opsets and op coverage ====================================================================


def opsets_section(
    records: Sequence[Record], image: Image | None, coverage_image: Image | None
) -> Section:
    rows = [
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
    ]
    headers = (
        "exporter",
        "opset",
        "cells",
        "work (% of attempted)",
        "ORT p50 vs lowest opset (median)",
    )
    ops = coverage_table(records)
    unit = run_coverage(records).unit if ops is not None else ""
    title = "ATen op coverage" if unit == "ATen ops" else f"Op coverage ({unit})"
    ops_section = sub(title, ops, coverage_image) if ops is not None else None
    return sub("Opsets and op coverage", table(headers, rows), image, ops_section)


def coverage_table(records: Sequence[Record]) -> Table | None:
    """Op coverage per exporter and opset (harness.coverage.matrix), when the run has op data:
    from op cells (the ops suite) or from the models' ATen inventories."""
    cov = run_coverage(records)
    if cov.is_empty:
        return None
    summaries = cov.summaries() + cov.totals()  # OpInfos: per dtype, then over all dtypes
    sampled = any(s.samples_run is not None for s in summaries)  # OpInfo cells
    rows = [
        (
            Text(s.column.label),
            Text(str(s.ops)),
            *(Text(str(s.counts[state])) for state in coverage.STATES),
            Text(percent(s.covered_share)),
            Text(percent(s.weighted_share)),
            *((Text(samples_text(s)),) if sampled else ()),
        )
        for s in summaries
    ]
    states = tuple(coverage.STATE_TEXT[state] for state in coverage.STATES)
    headers = ("exporter@opset", "ops", *states, "covered", "weighted by model usage")
    return table((*headers, *(("samples matched",) if sampled else ())), rows)


# == against a baseline run ====================================================================


def comparison_section(
    baseline: Sequence[Record], records: Sequence[Record], image: Image | None
) -> Section:
    data = comparison_data(baseline, records)
    counts = Counter(p.verdict for p in data.points)
    summary = Paragraph(
        f"{len(data.points)} cells timed in both runs: {counts['regression']} slower and "
        f"{counts['improvement']} faster than ±{data.threshold:.0%}; "
        f"{len(data.unmatched)} cells not timed in both."
    )
    title = f"Latency against baseline {data.baseline_run}"
    return sub(title, summary, _moved_table(data), image)


def _moved_table(data: ComparisonData) -> Table | None:
    """The cells whose ORT p50 moved beyond the band, worst first."""
    rows = [
        (
            Text(p.cell),
            Text(fmt(p.baseline_ms)),
            Text(fmt(p.candidate_ms)),
            Text(fmt(p.ratio, "×")),
            Text(p.verdict),
        )
        for p in data.points
        if p.verdict != "within"
    ]
    headers = ("cell", "baseline p50 ms", "candidate p50 ms", "ratio", "verdict")
    return table(headers, rows, noun="cells") if rows else None


# == every cell ================================================================================

_CELL_HEADERS = (
    "model", "exporter", "opset", "saved opset", "device", "shape", "variant", "status", "stage",
    "export s", "peak MiB", "ORT p50 ms", "eager p50 ms", "speedup", "artifacts",
)  # fmt: skip


def _cell_row(r: Record) -> tuple[Text, ...]:
    return (
        Text(r.model),
        Text(r.exporter),
        Text(str(r.opset)),
        Text(str(r.export.opset_actual) if r.export.opset_actual is not None else MISSING),
        Text(r.device),
        Text("dynamic" if r.dynamic else "static"),
        Text(r.variant),
        status_cell(r),
        Text(r.stage or MISSING),
        Text(fmt(r.export.seconds)),
        Text(fmt(r.export.peak_rss_mb)),
        Text(fmt(r.ort.latency.p50 if r.ort.latency else None)),
        Text(fmt(r.eager.latency.p50 if r.eager.latency else None)),
        Text(fmt(r.speedup, "×")),
        artifacts_link(r),
    )


def cells_section(lay: Layout) -> Section:
    records = lay.in_order()
    cells = Table(
        _CELL_HEADERS,
        tuple(_cell_row(r) for r in records),
        folded=f"{len(records)} cells, one row each",
        row_ids=tuple(f"cell-{r.cell.cell_id}" for r in records),
    )
    return Section("All cells", (cells,))
