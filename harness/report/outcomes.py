"""How the cells of a run ended: the verdict, the counts per exporter@opset (the report's
Summary and the table `harness run` prints at the end), the pass matrix, the failures
grouped by error signature and the expected failures.

Every fact about a status (passing, word, mark, colour, legend) is the `Status`'s own.
The pass matrix stays readable at hundreds of models: above FOLD_ABOVE_ROWS rows it shows
the rows with a failure, worst first, and folds the full matrix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.report.data import failing_rows, median_or_none, opset_differs, status_word
from harness.report.document import (
    FOLD_ABOVE_ROWS,
    MISSING,
    Code,
    Image,
    Legend,
    Paragraph,
    Section,
    Table,
    Text,
    fmt,
    sub,
    table,
)
from harness.report.layout import Column, Layout, RowKey, layout, unique_cells
from harness.store.diagnosis import mismatch_stage_text, repro_text
from harness.store.records import Record
from harness.store.rundir import ARTIFACTS
from harness.store.status import Status

OPEN_FAILING_ROWS = 100  # the matrix's rows with a failure stay unfolded up to this many

# == the verdict and the counts per exporter@opset =============================================


def verdict(records: Sequence[Record]) -> str:
    """'72 cells: 60 ok, 4 xfail, 8 failed (export_failed 5, numerics_mismatch 3)'."""
    if not records:
        return "0 cells: nothing ran"
    counts = Counter(r.status for r in records)
    passing = [s for s in Status if s.passing and (counts[s] or s is Status.OK)]
    parts = [f"{counts[s]} {s}" for s in passing]
    order = list(Status)
    failed = sorted(
        ((s, n) for s, n in counts.items() if not s.passing),
        key=lambda sn: (-sn[1], order.index(sn[0])),
    )
    if failed:
        detail = ", ".join(f"{s} {n}" for s, n in failed)
        parts.append(f"{sum(n for _, n in failed)} failed ({detail})")
    return f"{len(records)} cells: " + ", ".join(parts)


# The passing statuses besides ok (xfail, xpass, skipped) get a column each; the others
# are counted together as failed.
_OTHER_PASSING = tuple(s for s in Status if s.passing and s is not Status.OK)
SUMMARY_HEADERS = (
    "exporter@opset",
    "cells",
    "ok",
    "failed",
    *_OTHER_PASSING,
    "export s",
    "speedup",
)


def _summary_row(label: str, records: Sequence[Record]) -> tuple[str, ...]:
    counts = Counter(r.status for r in records)
    return (
        label,
        str(len(records)),
        str(counts[Status.OK]),
        str(sum(not r.status.passing for r in records)),
        *(str(counts[s]) for s in _OTHER_PASSING),
        fmt(median_or_none(r.export.seconds for r in records)),
        fmt(median_or_none(r.speedup for r in records), "×"),
    )


def summary_rows(records: Sequence[Record]) -> list[tuple[str, ...]]:
    """SUMMARY_HEADERS' values per exporter@opset, then for the whole run ('all')."""
    records = unique_cells(records)
    lay = layout(records)
    by_column: dict[Column, list[Record]] = defaultdict(list)
    for (_, column), r in lay.cells.items():
        by_column[column].append(r)
    rows = [_summary_row(lay.column_label(c), by_column[c]) for c in lay.columns]
    return [*rows, _summary_row("all", records)]


def summary_table(records: Sequence[Record]) -> str:
    """A one-screen plain-text table per exporter/opset, for the end of `harness run`."""
    rows = summary_rows(records)
    widths = [max(len(line[i]) for line in [SUMMARY_HEADERS, *rows]) for i in range(len(rows[0]))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        return "  ".join([first, *(c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True))])

    rule = "  ".join("-" * w for w in widths)
    body = [line(r) for r in rows[:-1]]
    return "\n".join([line(SUMMARY_HEADERS), rule, *body, rule, line(rows[-1])])


def summary_section(records: Sequence[Record]) -> Section:
    rows = tuple(tuple(Text(value) for value in row) for row in summary_rows(records))
    passing = [str(s) for s in Status if s.passing]
    note = Paragraph(
        f"failed: cells not {', '.join(passing[:-1])} or {passing[-1]}; "
        "export s and speedup: medians over the cells that measured them."
    )
    return Section("Summary", (Table(SUMMARY_HEADERS, rows), note))


# == the pass matrix ===========================================================================


def status_text(record: Record) -> str:
    """'✅ ok', '❌ export (translate)', '🟡 xfail (capture) 18≠17'."""
    text = f"{record.status.mark} {status_word(record)}"
    if opset_differs(record):
        text += f" {record.export.opset_actual}≠{record.opset}"
    return text


def status_cell(record: Record) -> Text:
    hover = record.error_signature or record.reason
    return Text(status_text(record), status=record.status, title=hover)


def grid_table(
    lay: Layout,
    cell: Callable[[Record], Text],
    *,
    rows: Sequence[RowKey] | None = None,
    noun: str = "rows",
    fold_above: int = FOLD_ABOVE_ROWS,
) -> Table:
    """Rows: model (shape); columns: exporter@opset; an absent cell is blank."""
    body = [
        (Text(lay.row_label(row)), *(_maybe(lay.record(row, col), cell) for col in lay.columns))
        for row in (lay.rows if rows is None else rows)
    ]
    headers = ("model", *(lay.column_label(c) for c in lay.columns))
    return table(headers, body, noun=noun, fold_above=fold_above)


def _maybe(record: Record | None, cell: Callable[[Record], Text]) -> Text:
    return Text("") if record is None else cell(record)


def legend(records: Iterable[Record]) -> Legend | None:
    records = list(records)
    present = {r.status for r in records}
    entries = tuple(
        Text(f"{s.mark} {s.word}", status=s, title=s.legend) for s in Status if s in present
    )
    note = None
    if any(opset_differs(r) for r in records):
        note = "18≠17: the saved model's opset (18) differs from the requested one (17)"
    return Legend(entries, note) if entries else None


def matrix_section(lay: Layout, image: Image | None) -> Section:
    key = legend(lay.cells.values())
    if len(lay.rows) <= FOLD_ABOVE_ROWS:
        return sub("Pass matrix", grid_table(lay, status_cell), key, image)
    failing = failing_rows(lay)
    skipped = sum(all(r.status is Status.SKIPPED for r in lay.row_records(row)) for row in lay.rows)
    skipped_text = f" ({skipped} of them skipped in every column: see Skipped)" if skipped else ""
    intro = Paragraph(
        f"{len(lay.rows)} rows: {len(failing)} with a failure (below, worst first), "
        f"{len(lay.rows) - len(failing)} that pass in every column{skipped_text}. "
        "The full matrix is folded."
    )
    problems = grid_table(
        lay, status_cell, rows=failing, noun="rows with a failure", fold_above=OPEN_FAILING_ROWS
    )
    full = grid_table(lay, status_cell, noun="rows: the full matrix")
    return sub("Pass matrix", intro, problems if failing else None, key, full, image)


# == failures ==================================================================================


@dataclass(frozen=True)
class FailureGroup:
    """Failed cells that share an error signature (one cause, usually)."""

    signature: str
    records: tuple[Record, ...]

    @property
    def statuses(self) -> list[str]:
        return list(dict.fromkeys(r.status for r in self.records))

    def excerpt(self, limit: int = 600) -> str:
        first = next((r for r in self.records if r.error_message), None)
        if first is None or not first.error_message:
            return self.signature
        message = first.error_message
        text = f"{first.error_type}: {message}" if first.error_type else message
        return text if len(text) <= limit else text[:limit] + " …"


def failure_groups(records: Iterable[Record]) -> list[FailureGroup]:
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if not r.status.passing:
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


def repro_link(record: Record) -> Text:
    """The cell's minimal repro: 'reproduces, 163 → 1 nodes' linking its repro_min.py, or
    why it has none; '—' where none was attempted."""
    text = repro_text(record)
    if text is None:
        return Text(MISSING)
    script = record.artifacts.get("minimal_repro")
    if not script or text.startswith("no repro"):
        return Text("none", title=text)
    return Text(
        text, link=script, title="repro_min.py: python repro_min.py exits 1 where it reproduces"
    )


def _failure_section(group: FailureGroup) -> Section:
    located = any(r.numerics.first_divergence for r in group.records)
    staged = any(r.numerics.mismatch_stage for r in group.records)
    repro = any(r.minimal_repro for r in group.records)
    rows = [
        (
            Text(r.cell.label()),
            Text(r.status, status=r.status),
            Text(r.stage or MISSING),
            *((Text(r.divergence_text or MISSING),) if located else ()),
            *((Text(mismatch_stage_text(r) or MISSING),) if staged else ()),
            *((repro_link(r),) if repro else ()),
            artifacts_link(r),
        )
        for r in group.records
    ]
    n = len(group.records)
    title = f"{n} cell{'s' if n != 1 else ''} — {', '.join(group.statuses)}:"
    headers = (
        "cell",
        "status",
        "stage",
        *(("first divergent node",) if located else ()),
        *(("changed by",) if staged else ()),
        *(("minimal repro",) if repro else ()),
        "artifacts",
    )
    cells = table(headers, rows, noun="cells")
    return Section(title, (cells, Code(group.excerpt())), code_title=group.signature)


def failures_section(records: Sequence[Record]) -> Section:
    groups = failure_groups(records)
    if not groups:
        return Section("Failures", (Paragraph("No failures."),))
    n = sum(len(g.records) for g in groups)
    intro = Paragraph(
        f"{n} failed cells in {len(groups)} groups by error signature, largest first."
    )
    return Section("Failures", (intro, *(_failure_section(g) for g in groups)))


SKIPPED_MODELS_SHOWN = 8


def skipped_section(records: Sequence[Record]) -> Section | None:
    """The skipped cells grouped by reason, most common first: what does not apply here
    (a library that does not import, an architecture that does not build, no GPU)."""
    skipped = [r for r in records if r.status is Status.SKIPPED]
    if not skipped:
        return None
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in skipped:
        groups[r.reason or r.error_signature or MISSING].append(r)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    rows = [(Text(reason), Text(str(len(rs))), Text(_model_list(rs))) for reason, rs in ordered]
    models = len({r.model for r in skipped})
    intro = Paragraph(
        f"{_count(len(skipped), 'cell')} of {_count(models, 'model')} skipped, in "
        f"{_count(len(groups), 'group')} by reason, largest first."
    )
    return Section("Skipped", (intro, table(("reason", "cells", "models"), rows, noun="reasons")))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _model_list(records: Sequence[Record]) -> str:
    names = sorted({r.model for r in records})
    shown = ", ".join(names[:SKIPPED_MODELS_SHOWN])
    more = len(names) - SKIPPED_MODELS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def expectations_section(records: Sequence[Record]) -> Section | None:
    # xfail and xpass: the statuses an expectation (the zoo entry's `expect`) gave
    marked = [r for r in records if r.status.by_expectation]
    if not marked:
        return None
    rows = [
        (
            Text(r.cell.label()),
            Text(status_text(r), status=r.status),
            Text(r.reason or r.error_signature or MISSING),
        )
        for r in sorted(marked, key=lambda r: (r.status, r.cell))
    ]
    xpass = Status.XPASS
    note = Paragraph(
        f"{xpass.mark} {xpass}: the cell was expected to fail and passed; update its expectation."
    )
    return Section("Expected failures", (table(("cell", "status", "reason"), rows), note))
