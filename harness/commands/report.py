"""`harness report`: rebuild a run's report.md, report.html and plots, or draw the trends."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.commands import number
from harness.errors import UsageError

HELP = "rebuild a run's report (report.md, report.html, plots/) or draw the history trends"
DESCRIPTION = """\
Rebuild the report of a finished (or interrupted) run from its manifest.json and
records.jsonl, or draw the trends of the run history.

examples:
  harness report results/2025-01-01T02-00-00            # report.md, report.html, plots/*.png
  harness report results/B --baseline results/A         # plus ORT latency of B against A
  harness report results/B --no-plots                   # markdown and HTML only, fast
  harness report --history --out results/trends         # trends from results/history.sqlite
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir", nargs="?", type=Path, metavar="RUN_DIR", help="the run directory"
    )
    parser.add_argument(
        "--baseline", type=Path, metavar="RUN_DIR", help="also plot ORT latency against this run"
    )
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument(
        "--history", action="store_true", help="draw the trends of the history database instead"
    )
    parser.add_argument(
        "--db",
        type=Path,
        default=Path("results/history.sqlite"),
        metavar="PATH",
        help="history database (default: %(default)s)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where --history writes (default: DB's folder/trends)",
    )
    parser.add_argument(
        "--limit", type=int, metavar="N", help="with --history: the last N runs only"
    )
    parser.add_argument(
        "--threshold",
        type=number(open_low=True),
        default=0.10,
        metavar="FRACTION",
        help="band around the baseline/recent median that counts as noise (default: %(default)s)",
    )


def main(args: argparse.Namespace) -> int:
    if args.history:
        if args.run_dir is not None or args.baseline is not None:
            raise UsageError("report --history takes no RUN_DIR and no --baseline")
        return _history(args)
    if args.run_dir is None:
        raise UsageError("report: give a RUN_DIR, or --history")
    return _run_report(args)


def _run_report(args: argparse.Namespace) -> int:
    from harness.report import write_reports
    from harness.store.rundir import RunDirError, torn_tail

    for flag, path in (("RUN_DIR", args.run_dir), ("--baseline", args.baseline)):
        if path is not None and not path.is_dir():
            raise UsageError(f"{flag} {path}: no such run directory")
    try:
        written = write_reports(args.run_dir, plots=not args.no_plots, baseline=args.baseline)
        torn = torn_tail(args.run_dir)
    except RunDirError as exc:
        raise UsageError(str(exc)) from None
    _print_written(written)
    if torn is not None:  # its cell is in no table: say so, and how to run it again
        print(
            f"warning: records.jsonl:{torn.line_number} is a record cut short and is left out;"
            f" `harness run --resume {args.run_dir}` runs its cell again",
            file=sys.stderr,
        )
    return 0


def _history(args: argparse.Namespace) -> int:
    try:
        from harness.history.db import HistoryError, load_runs
    except ModuleNotFoundError as exc:
        if exc.name != "harness.history.db":
            raise
        raise UsageError(
            "report --history: this harness has no history database support yet"
        ) from None
    from harness.report import write_trend_report
    from harness.store.runs import comparability_differences

    if not args.db.is_file():
        raise UsageError(f"--db {args.db}: no such history database (harness history writes it)")
    try:
        runs = load_runs(args.db, limit=args.limit)
    except HistoryError as exc:
        raise UsageError(str(exc)) from None
    # Trends only mean something between runs measured alike (hardware, threads, protocol):
    # keep the runs comparable with the latest one.
    if runs:
        latest = runs[-1].manifest
        kept = [r for r in runs if not comparability_differences(r.manifest, latest)]
        if len(kept) < len(runs):
            print(f"{len(runs) - len(kept)} runs measured differently from the latest left out")
        runs = kept
    out = args.out if args.out is not None else args.db.parent / "trends"
    written = write_trend_report(runs, out, threshold=args.threshold)
    _print_written(written)
    return 0


def _print_written(paths: list[Path]) -> None:
    for path in paths:
        print(path)
