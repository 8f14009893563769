"""The report's reduced-precision section (a run with a float16 or bfloat16 cell): per
exporter and dtype, how many cells exported, ran in ORT, agree with eager at the dtype, and
lose precision against the float32 model (eager, ORT), with the cells whose runtime has no
kernel for the dtype counted apart; then cell by cell."""

from __future__ import annotations

from collections.abc import Sequence

from harness.report.document import Section, Table, Text, fmt, sub, table
from harness.report.layout import unique_cells
from harness.store.measures import OutputCheck, PrecisionLoss
from harness.store.records import Record
from harness.store.status import Status

COUNT_HEADERS = (
    "exporter",
    "dtype",
    "cells",
    "exported",
    "ran in ORT",
    "agree at dtype",
    "eager loses precision",
    "ORT loses precision",
    "no kernel",
)
WHO_LOSES = {
    "eager": "eager (the model is not safe at the dtype)",
    "ort": "ORT (lost in the export or the runtime)",
    "both": "eager and ORT",
}


def _ran(r: Record) -> bool:
    return r.status.exported or r.status.wrong_numbers


def _loses(r: Record, side: str) -> bool:
    loss = r.numerics.precision_loss
    return loss is not None and loss.worse() in (side, "both")


def _count_row(exporter: str, dtype: str, records: Sequence[Record]) -> tuple[Text, ...]:
    counts = (
        len(records),
        sum(r.export.seconds is not None for r in records),
        sum(_ran(r) for r in records),
        sum(r.status.exported for r in records),
        sum(_loses(r, "eager") for r in records),
        sum(_loses(r, "ort") for r in records),
        sum(r.status is Status.RUNTIME_MISSING for r in records),
    )
    return (Text(exporter), Text(dtype), *(Text(str(n)) for n in counts))


def counts_table(records: Sequence[Record]) -> Table:
    groups: dict[tuple[str, str], list[Record]] = {}
    for r in records:
        groups.setdefault((r.exporter, r.dtype.value), []).append(r)
    rows = [_count_row(e, d, rs) for (e, d), rs in sorted(groups.items())]
    return table(COUNT_HEADERS, rows)


def worst_abs(checks: Sequence[OutputCheck] | None) -> str:
    """The largest `max_abs` of the checks, as a table shows it."""
    sizes = [c.max_abs for c in checks or () if c.max_abs is not None]
    return fmt(max(sizes)) if sizes else fmt(None)


def _fraction(checks: Sequence[OutputCheck] | None) -> str:
    shares = [c.mismatch_fraction for c in checks or () if c.mismatch_fraction is not None]
    return f"{max(shares):.1%}" if shares else fmt(None)


def _who(loss: PrecisionLoss | None) -> str:
    worse = None if loss is None else loss.worse()
    return "neither" if loss is not None and worse is None else WHO_LOSES.get(worse or "", "—")


def _cell_row(r: Record) -> tuple[Text, ...]:
    loss = r.numerics.precision_loss
    kernel = r.error_message if r.status is Status.RUNTIME_MISSING else None
    return (
        Text(r.cell.label()),
        Text(r.status.value),
        Text(worst_abs(r.numerics.checks)),
        Text(_fraction(r.numerics.checks)),
        Text(worst_abs(None if loss is None else loss.eager)),
        Text(worst_abs(None if loss is None else loss.ort)),
        Text(kernel or _who(loss)),
    )


CELL_HEADERS = (
    "cell",
    "status",
    "ORT vs eager at dtype (max abs)",
    "elements beyond tolerance",
    "eager vs float32",
    "ORT vs float32",
    "loses precision / no kernel",
)


def precision_section(records: Sequence[Record]) -> Section | None:
    """None for a run of float32 cells only."""
    reduced = [r for r in unique_cells(records) if r.dtype.reduced]
    if not reduced:
        return None
    cells = table(CELL_HEADERS, [_cell_row(r) for r in reduced], noun="cells")
    return sub("Reduced precision", counts_table(reduced), cells)
