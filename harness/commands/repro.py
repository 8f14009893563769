"""`harness repro`: minimal repros for the failing cells of an existing run."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from harness.commands import name_list
from harness.errors import UsageError

HELP = "shrink a run's failures to minimal standalone repro scripts (repro_min.py)"
DESCRIPTION = """\
For each failure cluster of a finished run (failures with one error signature), shrink the
first cell's model to the smallest program that still fails the same way: delta debugging
over the program torch.export captured, its cut values fed as inputs. Each repro is
artifacts/<cell>/repro_min.py with its inputs beside it: plain torch, onnx and
onnxruntime, exiting 1 where the failure reproduces. Each script is run in a fresh process
that cannot import the harness, and the record says whether it reproduced and the node
counts before and after (`minimal_repro`, `artifacts.minimal_repro`). Needs the zoo the
run used (the same --zoo paths, as the manifest records them).

examples:
  harness repro results/20261122-130000-ab12                # first cell of each cluster
  harness repro results/R --models 'hf.bert*'               # every failing cell of these models
  harness repro results/R hf.bert--dynamo--op18--cpu--static--base   # one cell (its folder name)
  harness repro results/R --bound 120 --jobs 2
"""


def seconds_bound(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {value!r}") from None
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"{value}: give 0 < SECONDS <= 3600")
    return seconds


def jobs_count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"--jobs takes a positive integer, not {value!r}")
    return int(value)


def add_arguments(p: argparse.ArgumentParser) -> None:
    from harness.repro.job import DEFAULT_BOUND_S

    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a finished run directory")
    p.add_argument(
        "cells",
        nargs="*",
        metavar="CELL",
        help="cells by their artifacts folder name (default: one per cluster)",
    )
    p.add_argument(
        "--models",
        type=name_list,
        default=(),
        metavar="GLOB[,GLOB]",
        help="every failing cell of these models",
    )
    p.add_argument(
        "--bound",
        type=seconds_bound,
        default=DEFAULT_BOUND_S,
        metavar="SECONDS",
        help="time the search may take per cell (default %(default)g); the minimizer's process is"
        " killed 120 s past it",
    )
    p.add_argument(
        "--jobs", type=jobs_count, metavar="N", help="cells minimized at once (default: the CPUs)"
    )
    p.add_argument("--no-report", action="store_true", help="do not rewrite report.md/report.html")


def main(args: argparse.Namespace) -> int:
    from harness.repro import runner, select
    from harness.repro.figures import figures

    records = finished_run_records(args.run_dir)
    if args.cells and args.models:
        raise UsageError("repro: give CELL names or --models, not both")
    _check_cells(records, args.cells)
    chosen = select.choose(records, cells=args.cells, models=args.models)
    if not chosen:
        print("nothing to minimize: no failure a repro applies to", file=sys.stderr)
        return 0
    print(f"{len(chosen)} cells to minimize, search bound {args.bound:g} s each", file=sys.stderr)
    made = runner.make_repros(
        args.run_dir,
        chosen,
        run_sources(args.run_dir),
        bound_s=args.bound,
        jobs=args.jobs or runner.default_jobs(),
        progress=lambda m: print(line(m.record), file=sys.stderr, flush=True),
    )
    for text in figures([m.record for m in made]).lines():
        print(text)
    if not args.no_report:
        from harness.report import write_reports

        write_reports(args.run_dir)
    return 0


def line(record: object) -> str:
    """'[reproduces] cell: 600 -> 3 nodes, 12.1 s, artifacts/.../repro_min.py' or why not."""
    from harness.store.details import MinimalRepro
    from harness.store.records import Record

    assert isinstance(record, Record)
    m = record.minimal_repro or MinimalRepro()
    verdict = {True: "reproduces", False: "does not reproduce", None: "no repro"}[m.reproduces]
    nodes = f"{m.nodes_before} -> {m.nodes_after} nodes, " if m.nodes_after else ""
    where = record.artifacts.get("minimal_repro") or m.reason or ""
    return f"[{verdict}] {record.cell.label()}: {nodes}{m.wall_s} s, {where}"


def finished_run_records(run_dir: Path) -> list:  # type: ignore[type-arg]
    from harness.store import rundir

    if not run_dir.is_dir():
        raise UsageError(f"RUN_DIR {run_dir}: no such run directory")
    try:
        manifest = rundir.read_manifest(run_dir)
        records = rundir.read_records(run_dir)
    except rundir.RunDirError as exc:
        raise UsageError(str(exc)) from None
    if not manifest.finished:
        raise UsageError(
            f"{run_dir} is not finished (its manifest has no end time): finish it first with"
            f" `harness run --resume {run_dir}`"
        )
    return records


def _check_cells(records: list, cells: list[str]) -> None:  # type: ignore[type-arg]
    from harness.repro.select import kind_of

    by_id = {r.cell.cell_id: r for r in records}
    for cell in cells:
        if cell not in by_id:
            raise UsageError(
                f"no cell {cell!r} in this run (a cell is named as its artifacts folder)"
            )
        if kind_of(by_id[cell]) is None:
            raise UsageError(
                f"cell {cell!r} is {by_id[cell].status}: no failure a repro applies to"
            )


def run_sources(run_dir: Path) -> dict[str, str]:
    """Where each model comes from: the zoo as the run saw it (its --zoo paths)."""
    from harness.plan.build import RunOptions
    from harness.store import rundir
    from harness.zoo.discovery import discover, with_checkpoints

    options = RunOptions.from_dict(dict(rundir.read_manifest(run_dir).options))
    paths = [Path(p) for p in options.zoo if Path(p).exists()]
    zoo, _ = with_checkpoints(discover(paths), options.models)
    return {name: spec.source for name, spec in zoo.models.items()}


def add_bound_argument(p: argparse.ArgumentParser) -> None:
    """`harness run --repro-bound`: the automatic repros after a run."""
    p.add_argument(
        "--repro-bound",
        type=float,
        default=None,
        metavar="SECONDS",
        help="after the run, shrink the first cell of each failure cluster to a minimal repro"
        " (artifacts/<cell>/repro_min.py), searching at most SECONDS per cluster; 0: none"
        " (default: $HARNESS_REPRO_BOUND, else 60)",
    )


def bound(flag: float | None, environ: dict[str, str] | None = None) -> float:
    """The search bound per failure cluster: the flag, else $HARNESS_REPRO_BOUND, else the
    default; 0 turns the automatic repros off."""
    from harness.repro.job import DEFAULT_BOUND_S

    raw = flag if flag is not None else (environ or os.environ).get("HARNESS_REPRO_BOUND")
    try:
        seconds = DEFAULT_BOUND_S if raw is None else float(raw)
    except ValueError:
        raise UsageError(f"HARNESS_REPRO_BOUND={raw!r}: not a number of seconds") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise UsageError(
            f"--repro-bound {seconds:g}: give 0 (none) or a positive number of seconds"
        )
    return seconds


def after_run(sources: dict[str, str], run_dir: Path, bound_s: float) -> None:
    """The first cell of each failure cluster without a repro yet, minimized and verified
    (harness.repro.runner); the records say how it went."""
    from harness.repro import runner, select
    from harness.store.rundir import read_records

    chosen = [r for r in select.choose(read_records(run_dir)) if r.minimal_repro is None]
    if not chosen:
        return
    print(
        f"minimal repros: {len(chosen)} failure clusters, search bound {bound_s:g} s each",
        file=sys.stderr,
    )
    runner.make_repros(
        run_dir,
        chosen,
        sources,
        bound_s=bound_s,
        jobs=runner.default_jobs(),
        progress=lambda m: print(line(m.record), file=sys.stderr, flush=True),
    )
