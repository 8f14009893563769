"""The report's section on transformers' own exporter (a run with `dynamo` and
`transformers` cells): per model, the bare dynamo call beside transformers' exporter, and
how many models each works for alone. Where only transformers' exporter works, one of its
patches or fixes around torch.export and torch.onnx is doing what the bare call cannot:
the exporters' known bugs, as a downstream library works around them."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from harness.report.document import Paragraph, Section, Text, sub, table
from harness.report.layout import unique_cells
from harness.store.records import Record

BARE, HF = "dynamo", "transformers"
OUTCOMES = ("both", f"only {HF}", f"only {BARE}", "neither")


def _outcome(bare: Record, hf: Record) -> str:
    works = (bare.status.exported, hf.status.exported)
    return {
        (True, True): "both",
        (False, True): f"only {HF}",
        (True, False): f"only {BARE}",
    }.get(works, "neither")


def pairs(records: Sequence[Record]) -> list[tuple[Record, Record]]:
    """The (bare dynamo, transformers) records of each cell both exporters ran."""
    by_cell = {r.cell: r for r in records}
    found = []
    for hf in sorted((r for r in records if r.exporter == HF), key=lambda r: r.cell):
        bare = by_cell.get(hf.cell.replace(exporter=BARE))
        if bare is not None and hf.status.applies and bare.status.applies:
            found.append((bare, hf))
    return found


def hf_section(records: Sequence[Record]) -> Section | None:
    """None for a run without both exporters on the same cells."""
    both = pairs(unique_cells(records))
    if not both:
        return None
    counts = Counter(_outcome(bare, hf) for bare, hf in both)
    summary = table(("outcome", "cells"), [(Text(o), Text(str(counts[o]))) for o in OUTCOMES])
    differ = [(bare, hf) for bare, hf in both if bare.status != hf.status]
    rows = [
        (
            Text(hf.cell.label().replace(f" {HF}@", " @")),
            Text(bare.status.value),
            Text(hf.status.value),
        )
        for bare, hf in differ
    ]
    detail = table(("cell", BARE, HF), rows, noun="cells") if rows else None
    return sub("transformers' exporter against the bare dynamo call", summary, detail)


def workarounds_section(records: Sequence[Record]) -> Section | None:
    """Per workaround of transformers' exporter (`harness debt`): the cells that still
    need it and those that used it but pass without it; None before any search."""
    searched = [r for r in unique_cells(records) if r.workarounds is not None]
    if not searched:
        return None
    needing, obsolete_for = by_workaround(searched)
    needed = {name: [_label(r) for r in cells] for name, cells in needing.items()}
    obsolete = {name: [_label(r) for r in cells] for name, cells in obsolete_for.items()}
    rows = [
        (
            Text(name, code=True),
            Text(str(len(needed.get(name, [])))),
            Text(_first_cells(needed.get(name, []))),
            Text(_first_cells(obsolete.get(name, []))),
        )
        for name in sorted({*needed, *obsolete}, key=lambda n: (-len(needed.get(n, [])), n))
    ]
    headers = ("workaround", "cells needing it", "needed by", "no longer needed by")
    intro = Paragraph(
        f"{len(searched)} cells where only transformers' exporter works, searched without"
        " each workaround their export used (harness debt): what each still works around in"
        " torch.export and torch.onnx, and where it is obsolete (the records name every cell)."
    )
    return sub("transformers' workarounds: the exporters' known bugs", intro, table(headers, rows))


def by_workaround(
    records: Sequence[Record],
) -> tuple[dict[str, list[Record]], dict[str, list[Record]]]:
    """Per workaround, the searched cells that need it and those it is obsolete for."""
    needed: dict[str, list[Record]] = defaultdict(list)
    obsolete: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if r.workarounds is None:
            continue
        for name in r.workarounds.needed:  # its keys: the names (values: why)
            needed[name].append(r)
        for name in r.workarounds.obsolete:
            obsolete[name].append(r)
    return needed, obsolete


def _label(record: Record) -> str:
    return record.cell.label().replace(f" {HF}@", " @")


def _first_cells(labels: list[str], shown: int = 8) -> str:
    """'a; b; c', or the first `shown` and how many more (a workaround obsolete for 80
    cells is a count, not a wall of names)."""
    more = f"; and {len(labels) - shown} more" if len(labels) > shown else ""
    return "; ".join(labels[:shown]) + more if labels else "-"
