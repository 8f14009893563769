"""The README's task-heads figures (issue 35) from runs of the `transformers-tasks` suite,
measured, not enforced:

- the registry: (model type, head) pairs registered, distinct heads (entries), how many
  build and run in eager (the probe's inventory), how many of those ran with reduced inputs;
- per task and exporter: cells that apply, exported (the exporter returned a graph),
  agree with eager (numerics ok at every shape checked) and pass every check; with a
  dynamic run beside it, how many dynamic cells pass, verified at their second shape.

    PYTHONPATH=. python benchmarks/tasks_figures.py STATIC_RUN [DYNAMIC_RUN]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.report.layout import unique_cells
from harness.store import rundir
from harness.store.records import Record
from harness.store.tasks import by_task
from model_zoo.transformers._inventory import read_inventory
from model_zoo.transformers._tasks import TASKS_INVENTORY


def registry_figures(inventory: dict[str, Any]) -> dict[str, int]:
    models = inventory["models"]
    built = [e for e in models.values() if "reason" not in e]
    return {
        "pairs": sum(len(e["tasks"]) for e in models.values()),
        "pairs_built": sum(len(e["tasks"]) for e in built),
        "heads": len(models),
        "heads_built": len(built),
        "reduced_inputs": sum(bool(e.get("dropped")) for e in built),
    }


def _numerics_ok(r: Record) -> bool:
    return bool(r.numerics.checks) and all(c.ok for c in r.numerics.checks or ())


def counts(records: Sequence[Record]) -> tuple[int, int, int, int]:
    """Cells that apply, exported, numerically right, passing every check."""
    applying = [r for r in records if r.status.applies]
    return (
        len(applying),
        sum(r.export.seconds is not None for r in applying),
        sum(_numerics_ok(r) for r in applying),
        sum(r.status.exported for r in applying),
    )


def task_table(static: Sequence[Record], dynamic: Sequence[Record] = ()) -> str:
    exporters = sorted({r.exporter for r in static})
    headers = ["task"] + [f"{e}: applies / exported / agree / pass" for e in exporters]
    if dynamic:
        headers += [f"{e} dynamic: pass / applies" for e in exporters]
    static_groups, dynamic_groups = by_task(static), by_task(dynamic)
    rows = []
    for task, rs in static_groups.items():
        row = [task] + [
            " / ".join(map(str, counts([r for r in rs if r.exporter == e]))) for e in exporters
        ]
        if dynamic:
            mine = dynamic_groups.get(task, [])
            for e in exporters:
                applies, _, _, passing = counts([r for r in mine if r.exporter == e])
                row.append(f"{passing} / {applies}")
        rows.append(row)
    totals = ["all"] + [
        " / ".join(map(str, counts([r for r in static if r.exporter == e]))) for e in exporters
    ]
    if dynamic:
        for e in exporters:
            applies, _, _, passing = counts([r for r in dynamic if r.exporter == e])
            totals.append(f"{passing} / {applies}")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in [*rows, totals]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("static", type=Path)
    p.add_argument("dynamic", type=Path, nargs="?")
    args = p.parse_args(argv)
    print(registry_figures(read_inventory(TASKS_INVENTORY)))
    static = [r for r in unique_cells(rundir.read_records(args.static)) if not r.cell.dynamic]
    dynamic = (
        [r for r in unique_cells(rundir.read_records(args.dynamic)) if r.cell.dynamic]
        if args.dynamic
        else []
    )
    print(task_table(static, dynamic))
    return 0


if __name__ == "__main__":
    sys.exit(main())
