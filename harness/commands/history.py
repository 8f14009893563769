"""`harness history`: keep past runs in a SQLite database for noise-scaled comparisons."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from harness.commands import number
from harness.errors import UsageError
from harness.history import db as history
from harness.store.rundir import RunDirError

HELP = "keep runs in a history database (add, list, rebuild) for `harness compare --history`"
DESCRIPTION = f"""\
The history database (default {history.DEFAULT_DB}) indexes run directories: each run's
manifest, its comparability key (hardware, threads, protocol; versions are what gets
compared, so they are not part of it) and each record's summary (the cell, status,
signature, export figures, latency statistics; the samples stay in the run directory).
It is never the only copy: `rebuild` recreates it from the run directories. A database of
an older harness is migrated in place when it is opened.

examples:
  harness history add results/2025-06-01 results/2025-06-02
  harness history list
  harness history rebuild results/*/
  harness history prune --keep-days 365 --max-mb 1024   # the nightly's budget
  harness compare --history results/2025-06-03
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        type=Path,
        default=history.DEFAULT_DB,
        help=f"database path (default {history.DEFAULT_DB})",
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = sub.add_parser("add", help="ingest run directories (a run already there is replaced)")
    add.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    listing = sub.add_parser("list", help="the runs in the database, oldest first")
    listing.add_argument("--json", action="store_true", help="print JSON")
    rebuild = sub.add_parser("rebuild", help="recreate the database from run directories")
    rebuild.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    prune = sub.add_parser(
        "prune", help="drop the runs older than --keep-days, then the oldest over --max-mb"
    )
    prune.add_argument(
        "--keep-days", type=_days, default=365, help="days of runs kept (default 365)"
    )
    prune.add_argument(
        "--max-mb",
        type=number(open_low=True),
        default=1024.0,
        help="the largest the file may stay, in MiB (default 1024)",
    )
    for action in (
        add,
        listing,
        rebuild,
        prune,
    ):  # `--db` also after the action; SUPPRESS keeps the outer one
        action.add_argument("--db", type=Path, default=argparse.SUPPRESS, help="database path")


def _print_list(db: Path, as_json: bool) -> None:
    runs = history.list_runs(db)
    if as_json:
        print(json.dumps([asdict(r) for r in runs], indent=2))
        return
    for r in runs:
        print(
            f"{r.run_id}  {r.started}  {r.suite or '-'}  torch {r.torch or '?'}  key {r.comparability_key}  {r.ok}/{r.cells} ok  {r.run_dir}"
        )
    print(f"{len(runs)} runs in {db}")


def _days(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(
            f"takes a whole number of days of at least 1, not {text!r}"
        )
    return int(text)


def _prune(args: argparse.Namespace) -> None:
    done = history.prune(args.db, keep_days=args.keep_days, max_mb=args.max_mb)
    dropped = f"dropped {len(done.runs)} runs ({done.reason})" if done.runs else "dropped nothing"
    print(f"prune: {dropped}; {args.db} is {done.megabytes:.1f} MiB")


def main(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            _print_list(args.db, args.json)
            return 0
        if args.action == "prune":
            _prune(args)
            return 0
        ingest = history.rebuild if args.action == "rebuild" else history.add_runs
        runs = ingest(args.db, args.run_dirs)
    except (RunDirError, history.HistoryError) as exc:
        raise UsageError(str(exc)) from None
    for run in runs:
        print(
            f"{args.action}: {run.run_id} ({len(run.by_cell())} cells, key {history.comparability_key(run.manifest)})"
        )
    print(
        f"{len(runs)} runs {'rebuilt into' if args.action == 'rebuild' else 'added to'} {args.db}"
    )
    return 0
