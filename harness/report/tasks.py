"""The report's section on task heads (a run whose records carry a task: the
`transformers-tasks` suite): per task and exporter the pass rate, "NN%, passing/total" of
the cells that apply; the heads that ran without some of their task's inputs (a
vision-language model fed text alone, said by the zoo entry); then each task's failure
clusters, largest first."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from harness.report.document import Paragraph, Section, Text, sub, table
from harness.report.layout import unique_cells
from harness.store.records import Record
from harness.store.tasks import by_task, pass_rate

CLUSTERS_PER_TASK = 5  # the largest clusters of each task; the Failures section has them all


def _rate_row(task: str, records: Sequence[Record], exporters: Sequence[str]) -> tuple[Text, ...]:
    rates = [pass_rate(r for r in records if r.exporter == e) for e in exporters]
    skipped = sum(not r.status.applies for r in records)
    cells = [Text(rate.text()) if rate.total else Text("—") for rate in rates]
    return (Text(task), *cells, Text(str(skipped)))


def _clusters(task: str, records: Sequence[Record]) -> list[tuple[Text, ...]]:
    failed = [r for r in records if r.status.applies and not r.status.exported]
    counts = Counter((r.error_signature or r.status.value) for r in failed)
    rows: list[tuple[Text, ...]] = []
    for signature, n in counts.most_common(CLUSTERS_PER_TASK):
        members = [r for r in failed if (r.error_signature or r.status.value) == signature]
        exporters = ", ".join(sorted({r.exporter for r in members}))
        models = ", ".join(sorted({r.model for r in members})[:4])
        rows.append(
            (
                Text(task),
                Text(signature[:160], code=True),
                Text(str(n)),
                Text(exporters),
                Text(models),
            )
        )
    return rows


def tasks_section(records: Sequence[Record]) -> Section | None:
    """None for a run whose records carry no task."""
    groups = by_task(unique_cells(records))
    if not groups:
        return None
    exporters = sorted({r.exporter for rs in groups.values() for r in rs})
    rates = table(
        ("task", *exporters, "skipped"),
        [_rate_row(task, rs, exporters) for task, rs in groups.items()],
        noun="tasks",
    )
    intro = Paragraph(
        "Pass rate per task and exporter: cells that exported and passed every check, of the"
        " cells that apply. A head serving several tasks counts in each."
    )
    clusters = [row for task, rs in groups.items() for row in _clusters(task, rs)]
    cluster_table = (
        table(("task", "signature", "cells", "exporters", "models"), clusters, noun="clusters")
        if clusters
        else None
    )
    return sub("Task heads", intro, rates, _reduced(records), cluster_table)


def _reduced(records: Sequence[Record]) -> Paragraph | None:
    """The heads run without some of their task's inputs, as their entries say."""
    reduced = sorted({r.model for r in records if (r.metadata or {}).get("dropped")})
    if not reduced:
        return None
    shown = ", ".join(reduced[:12]) + (
        f" and {len(reduced) - 12} more" if len(reduced) > 12 else ""
    )
    return Paragraph(
        f"{len(reduced)} heads ran without some of their inputs (the zoo has no recipe that"
        f" runs with them; the entry's description says which and why): {shown}."
    )
