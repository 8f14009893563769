"""The README's reduced-precision and ORT-optimisation figures (issue 36) from a run
directory, measured, not enforced:

- per dtype and exporter (reduced-precision cells): how many cells export, run in ORT
  (not `runtime_missing`, not stopped before ORT ran them), agree with eager at the dtype
  (`ok`), lose precision against the float32 model (eager side / ORT side), and have no
  ORT kernel for the dtype (`runtime_missing`, with the ops named);
- per ORT optimisation level (cells besides `default` and `none`): how many fail numerics
  where their `none` twin passes, the optimizer named each time (`ort_broken_by`), and the
  median ORT latency gain over the `none` twin (its p50 over this cell's).

    PYTHONPATH=. python benchmarks/precision_figures.py RUN_DIR
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from harness.report.layout import unique_cells
from harness.store import rundir
from harness.store.records import OrtOpt, Record
from harness.store.status import Stage, Status

_MISSING_OP = re.compile(r"kernel for (\w+\(\d+\))")
BEFORE_ORT_RAN = {Stage.CAPTURE, Stage.TRANSLATE, Stage.OPTIMIZE, Stage.SAVE, Stage.CHECK}


def _ran_in_ort(r: Record) -> bool:
    """ORT loaded the graph and ran it (whatever the numbers)."""
    if r.export.seconds is None or r.status is Status.RUNTIME_MISSING:
        return False
    return r.stage not in (*BEFORE_ORT_RAN, Stage.ORT_SESSION, Stage.ORT_RUN)


def _loses(r: Record, side: str) -> bool:
    loss = r.numerics.precision_loss
    return loss is not None and loss.worse() in (side, "both")


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def precision_table(records: Sequence[Record]) -> str:
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        if r.dtype.reduced:
            groups[(r.dtype.value, r.exporter)].append(r)
    rows = []
    for (dtype, exporter), rs in sorted(groups.items()):
        missing = [r for r in rs if r.status is Status.RUNTIME_MISSING]
        ops = Counter(
            m.group(1) for r in missing if (m := _MISSING_OP.search(r.error_message or ""))
        )
        rows.append(
            (
                dtype,
                exporter,
                len(rs),
                sum(r.export.seconds is not None for r in rs),
                sum(_ran_in_ort(r) for r in rs),
                sum(r.status is Status.OK for r in rs),
                f"{sum(_loses(r, 'eager') for r in rs)} / {sum(_loses(r, 'ort') for r in rs)}",
                len(missing),
                ", ".join(f"{op} x{n}" for op, n in ops.most_common()) or "-",
            )
        )
    headers = (
        "dtype",
        "exporter",
        "cells",
        "export",
        "run in ORT",
        "ok at dtype",
        "lose precision (eager / ORT)",
        "runtime_missing",
        "ops without a kernel",
    )
    return _table(headers, rows)


def ort_opt_table(records: Sequence[Record]) -> str:
    by_cell = {r.cell: r for r in records}
    groups: dict[tuple[str, str], list[Record]] = defaultdict(list)
    for r in records:
        if r.ort_opt is not OrtOpt.NONE:
            groups[(r.ort_opt.value, r.exporter)].append(r)
    rows = []
    for (level, exporter), rs in sorted(groups.items()):
        changed, gains = [], []
        for r in rs:
            twin = by_cell.get(r.cell.replace(ort_opt=OrtOpt.NONE))
            if twin is None:
                continue
            if r.status is Status.NUMERICS_MISMATCH and twin.status.exported:
                changed.append(r)
            if twin.ort.latency and r.ort.latency and r.ort.latency.p50 > 0:
                gains.append(twin.ort.latency.p50 / r.ort.latency.p50)
        named = Counter(r.ort.broken_by or "(none found)" for r in changed)
        rows.append(
            (
                level,
                exporter,
                len(rs),
                sum(r.status is Status.OK for r in rs),
                len(changed),
                ", ".join(f"{name} x{n}" for name, n in named.most_common()) or "-",
                f"{statistics.median(gains):.2f}x ({len(gains)})" if gains else "-",
            )
        )
    headers = (
        "ORT optimisation",
        "exporter",
        "cells",
        "ok",
        "numerics broken (none twin passes)",
        "ort_broken_by",
        "p50 gain over none (median, cells)",
    )
    return _table(headers, rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run_dir", type=Path)
    a = p.parse_args(argv)
    records = unique_cells(rundir.read_records(a.run_dir))
    if any(r.dtype.reduced for r in records):
        print("Reduced precision\n\n" + precision_table(records) + "\n")
    if any(r.ort_opt is not OrtOpt.DEFAULT for r in records):
        print("ORT optimisations\n\n" + ort_opt_table(records) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
