"""`harness debt`: which of transformers' workarounds each model still needs."""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.commands import name_list
from harness.commands.repro import finished_run_records, jobs_count, run_sources, seconds_bound
from harness.errors import UsageError

if TYPE_CHECKING:
    from harness.debt.search import DebtJob
    from harness.runtime.kept import ZygotePool
    from harness.store.details import Workarounds
    from harness.store.records import Record

HELP = "find which of transformers' exporter workarounds each model of a run still needs"
DESCRIPTION = """\
For each cell of a finished run where transformers' exporter works (`transformers`, ok) and
the bare dynamo call on the same cell does not, run that cell again: once with every
workaround transformers installs around torch.export and torch.onnx (its patches, FX node
and program fixes, ONNX IR fixes, ONNX translations), watching which did something, then
without them: those another cell of the run needs one at a time, the others all together,
halved where the cell fails. One without which (alone) the cell fails is needed; one the
cell passes without is obsolete for that model at the installed torch and onnxscript. The record says
which (`workarounds`), and the report lists per workaround the models that still need it
and those that no longer do. Each cell's search runs in a process of its own, as a cell
does (forked from a zygote, under the memory ceiling the run's cells got), within --bound.

examples:
  harness debt results/tfd                                   # every such cell
  harness debt results/tfd --models 'hf.gemma*'
  harness debt results/tfd --workarounds exporter_dynamo._patch_sliding_window_layer
  harness debt results/tfd --jobs 1                          # one cell's search at a time
"""

GRACE_S = 300.0  # past the bound: the last try's build, export and judgement


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.debt.search import DEFAULT_BOUND_S

    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a finished run directory")
    p.add_argument(
        "--models", type=name_list, default=(), metavar="GLOB[,GLOB]", help="only these models"
    )
    p.add_argument(
        "--workarounds",
        type=name_list,
        default=(),
        metavar="NAME[,NAME]",
        help="try only these, keeping what an earlier search said of the others (default:"
        " every one the export used; the names are the record's workarounds.used, e.g."
        " exporter_onnx._patch_where)",
    )
    p.add_argument(
        "--bound",
        type=seconds_bound,
        default=DEFAULT_BOUND_S,
        metavar="SECONDS",
        help="time each cell's search may take (default %(default)g)",
    )
    p.add_argument(
        "--jobs", type=jobs_count, metavar="N", help="cells searched at once (default: the CPUs)"
    )
    p.add_argument("--no-report", action="store_true", help="do not rewrite report.md/report.html")


def main(args: argparse.Namespace) -> int:
    from harness.debt.search import DebtJob
    from harness.repro.runner import default_jobs, work_ceiling_gb, work_log
    from harness.runtime.kept import ZygotePool
    from harness.store.amend import amend_records

    records = finished_run_records(args.run_dir)
    _check_names(args.workarounds)
    chosen = chosen_cells(records, args.models)
    if not chosen:
        print("nothing to search: no cell where only transformers' exporter works", file=sys.stderr)
        return 0
    print(f"{len(chosen)} cells, search bound {args.bound:g} s each", file=sys.stderr)
    sources = run_sources(args.run_dir)
    only, suspected = list(args.workarounds), needed_anywhere(records)
    jobs = args.jobs or default_jobs()
    zygotes = ZygotePool(work_log(args.run_dir))
    ceiling = work_ceiling_gb(args.run_dir, jobs)

    def search(record: Record) -> tuple[Record, Workarounds | None]:
        job = DebtJob(record.to_dict(), sources[record.model], args.bound, only, suspected)
        return record, _search(record, job, zygotes, ceiling)

    with ThreadPoolExecutor(jobs) as pool:  # each a process of its own
        try:
            for record, found in pool.map(search, chosen):  # each kept as it finishes
                known = record.workarounds
                merged = found if known is None or found is None else known.then(found)
                changed = record.with_changes(workarounds=merged)
                amend_records(args.run_dir, {record.cell.key: changed})
                print(line(record, found), file=sys.stderr, flush=True)
        finally:
            zygotes.close()
    if not args.no_report:
        from harness.report import write_reports

        write_reports(args.run_dir)
    return 0


def _check_names(names: tuple[str, ...]) -> None:
    """Each name one the installed transformers registers (a typo would try nothing)."""
    if not names:
        return
    from harness.exporters.hf_debt import workarounds

    known = workarounds()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(
            f"debt: no workaround {', '.join(unknown)} in the installed transformers"
            f" ({len(known)} known, e.g. {', '.join(known[:3])})"
        )


def chosen_cells(records: list[Any], models: tuple[str, ...] = ()) -> list[Any]:
    """The `transformers` cells that pass whose bare `dynamo` twin (the same cell) does not
    (an expected failure included), of the models asked."""
    import fnmatch

    from harness.report.hf import pairs
    from harness.store.status import Status

    return [
        hf
        for bare, hf in pairs(records)
        if hf.status.exported
        and (not bare.passed or bare.status is Status.XFAIL)
        and (not models or any(fnmatch.fnmatchcase(hf.model, m) for m in models))
    ]


def needed_anywhere(records: list[Any]) -> list[str]:
    """The workarounds an earlier search found some cell of the run needs."""
    return sorted({n for r in records if r.workarounds for n in r.workarounds.needed})


def _search(
    record: Record, job: DebtJob, zygotes: ZygotePool, ceiling_gb: float | None
) -> Workarounds | None:
    """One cell's search as a cell is run; None (and why, printed) where it gave none."""
    from harness.debt.search import answer
    from harness.runtime.zygote import Work

    timeout_s = job.bound_s + GRACE_S
    work = Work(answer, job, record.exporter, record.opset, timeout_s, ceiling_gb)
    done = zygotes.call(work)
    if done.value is not None and not isinstance(done.value, str):
        return done.value
    why = done.value or f"{done.failure}; its output: {zygotes.log}"
    print(f"{record.cell.label()}: no search ({why})", file=sys.stderr)
    return None


def line(record: Any, found: Any) -> str:
    """'cell: needs A, B; obsolete: C (3 of 3 used, 31.2 s)'."""
    if found is None:
        return f"{record.cell.label()}: -"
    needs = ", ".join(found.needed) or "none"
    obsolete = ", ".join(found.obsolete) or "none"
    tried = f"{len(found.tried)} of {len(found.used)} used"
    return (
        f"{record.cell.label()}: needs {needs}; obsolete: {obsolete} ({tried}, {found.seconds} s)"
    )
