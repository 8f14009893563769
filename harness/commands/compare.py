"""`harness compare`: what got worse (or better) from a baseline to a candidate run."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from dataclasses import replace
from datetime import date
from pathlib import Path

from harness.commands import number
from harness.compare import (
    CompareError,
    Comparison,
    Options,
    Thresholds,
    check_comparable,
    compare_history,
    compare_runs,
    updated_expected,
)
from harness.compare.output import append_step_summary, write_outputs
from harness.compare.output.json_report import to_json
from harness.compare.output.markdown import to_markdown
from harness.errors import UsageError
from harness.history.db import DEFAULT_DB, HistoryError, count_other_keys, load_comparable
from harness.pipeline.remeasure import remeasure
from harness.store.paired import PairPlan
from harness.store.rundir import RunDirError
from harness.store.runs import Run, VariantError, read_run, variant_run
from harness.store.status import Status
from harness.zoo import expected_file
from harness.zoo.expected_file import ExpectedFile, ExpectedFileError

HELP = "compare a candidate run with a baseline run or the history; exit 1 on blocking regressions"
DEFAULT_EXPECTED = Path("expected/status.csv")
_T = Thresholds()


def _status_order() -> str:
    """'Status order, better to worse: ok/xfail/xpass/skipped < ...', from the ranks."""
    ranks = sorted({s.rank for s in Status})
    order = " < ".join("/".join(s for s in Status if s.rank == r) for r in ranks)
    return textwrap.fill(f"Status order, better to worse: {order}.", width=90)


DESCRIPTION = f"""\
Compare CANDIDATE with BASELINE (two run directories), or with the last K comparable runs
of the history database (--history CANDIDATE), or two variants of one run
(--variants BASELINE,CANDIDATE RUN_DIR: `harness run --variant new=transformers==X` ran
every cell with the base packages and again with another transformers).

Deterministic findings (exact): status ok -> failure (with stage and error), fixed cells,
opset_actual changes, numerics ok flips, max error grown {_T.numerics_growth:g}x within tolerance, new
unsupported ATen ops, ATen ops that no longer export, cells that appear or vanish.
A cell that passed and now fails blocks (where an expected-status file applies, the file
decides instead); the others are warnings, improvements or info.

Noisy findings (ORT latency, eager latency, export time, export peak memory on the host
and, on a CUDA cell, the device): the ratio of medians must pass an effect-size floor (latency {_T.latency_floor:.0%}, export time {_T.export_time_floor:.0%},
memory {_T.memory_floor:.0%} and {_T.memory_abs_mb:g} MiB). Against one run, a Mann-Whitney U test on the
raw latency samples (alpha {_T.alpha:g}) must agree; export time and memory have one sample
per run, so there the floor alone decides and a regression is a warning. Against history
(--history) the threshold is max(floor, {_T.noise_k:g} x the series' robust run-to-run noise, MAD x 1.4826
of the log-ratios of past medians), judged after the night-wide shift (median log-ratio of
all series) is divided out. ORT latency regressions block; eager latency ones warn; export
time and memory block only against a history long enough to measure their noise.

Same graph, same speed: a cell whose graph fingerprint and ORT runtime are unchanged is never
judged on ORT latency (those cells measure the machine's drift, the only part divided out);
a common shift of the changed cells is its own finding (run_shift). A cell whose graph
changed and whose two graphs were kept (`harness run --keep-graphs`) is timed again: both
graphs in one Ray task, interleaved ABBA blocks, a three-way verdict on the per-pair
log-ratios' confidence interval (more pairs on "unknown"); it replaces the separate-run
verdict (--no-remeasure to skip).

Expected statuses: a CSV kept in the repository (default {DEFAULT_EXPECTED} when it exists;
columns {",".join(expected_file.COLUMNS)};
`*` globs in the cell columns; the most specific row wins; expired rows are ignored; a cell
without a row must pass). A cell worse than expected blocks, and so does one that ends in
the expected status another way: at another `stage` than the row names, or with an error
that `match` (a regular expression) does not find. One better than expected is reported.
Rewrite the file from a run (exact rows with the status and stage each cell ended in):
  harness compare --update-expected [--expected PATH] RUN_DIR
{_status_order()}

exit codes: 0 nothing blocking, 1 blocking regression (with --fail-on regression),
2 usage or infrastructure error (missing run, schema too new, runs not comparable).

--variants A,B compares two variants of one run (`harness run --variant`): variant A's
cells are the baseline, B's the candidate, matched cell by cell.

examples:
  harness compare results/A results/B
  harness compare results/R --variants base,new       # two --variant's of one run
  harness compare results/A results/B --out compare/ --format json
  harness history add results/*/ && harness compare --history results/B --last 10
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "runs",
        nargs="*",
        metavar="RUN_DIR",
        help="BASELINE CANDIDATE, or CANDIDATE with --history/--update-expected",
    )
    p.add_argument(
        "--variants",
        metavar="BASELINE,CANDIDATE",
        help="compare two variants of one run (`harness run --variant NAME=...`), e.g. base,new",
    )
    p.add_argument(
        "--history",
        action="store_true",
        help="compare CANDIDATE with the last comparable runs of the history database",
    )
    p.add_argument(
        "--db", type=Path, default=DEFAULT_DB, help=f"history database (default {DEFAULT_DB})"
    )
    p.add_argument(
        "--last",
        type=int,
        default=10,
        metavar="K",
        help="history runs to compare with (default 10)",
    )
    p.add_argument(
        "--format",
        choices=("md", "json"),
        default="md",
        help="what to print on stdout (default md)",
    )
    p.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="write compare.md, compare.json, junit.xml, benchmark.json here",
    )
    p.add_argument(
        "--fail-on",
        choices=("regression", "never"),
        default="regression",
        help="exit 1 on blocking findings (default) or never",
    )
    p.add_argument(
        "--expected",
        type=Path,
        metavar="PATH",
        help=f"expected-status CSV (default {DEFAULT_EXPECTED} when it exists)",
    )
    p.add_argument("--no-expected", action="store_true", help="ignore the expected-status file")
    p.add_argument(
        "--update-expected",
        action="store_true",
        help="rewrite the expected-status file from RUN_DIR's statuses and stages, then exit",
    )
    p.add_argument(
        "--allow-different-hardware",
        action="store_true",
        help="compare runs from different hardware/settings: statuses only",
    )
    p.add_argument(
        "--no-remeasure",
        action="store_true",
        help="do not time the changed graphs again together (by default, every cell whose graph"
        " changed and whose two graphs were kept, `harness run --keep-graphs`, is re-measured"
        " in pairs as a Ray task, and that verdict decides its ORT latency)",
    )
    p.add_argument(
        "--max-pairs",
        type=int,
        default=PairPlan().max_pairs,
        metavar="N",
        help=f"interleaved pairs per changed cell at most (default {PairPlan().max_pairs})",
    )
    p.add_argument(
        "--address",
        metavar="auto|HOST:PORT",
        help="re-measure on an existing Ray cluster (default: a local instance)",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="re-measure on this machine without Ray (a process per changed cell)",
    )
    floor = number()
    p.add_argument("--latency-floor", type=floor, default=_T.latency_floor, metavar="FRACTION")
    p.add_argument(
        "--export-time-floor", type=floor, default=_T.export_time_floor, metavar="FRACTION"
    )
    p.add_argument("--memory-floor", type=floor, default=_T.memory_floor, metavar="FRACTION")
    p.add_argument("--memory-floor-mb", type=floor, default=_T.memory_abs_mb, metavar="MIB")
    p.add_argument(
        "--alpha",
        type=number(high=1.0, open_low=True),
        default=_T.alpha,
        help="rank test significance level",
    )
    p.add_argument(
        "--noise-k",
        type=number(open_low=True),
        default=_T.noise_k,
        help="history threshold in robust sigmas",
    )


def _thresholds(args: argparse.Namespace) -> Thresholds:
    return Thresholds(
        latency_floor=args.latency_floor,
        export_time_floor=args.export_time_floor,
        memory_floor=args.memory_floor,
        memory_abs_mb=args.memory_floor_mb,
        alpha=args.alpha,
        noise_k=args.noise_k,
    )


def _expected_path(args: argparse.Namespace) -> Path | None:
    if args.no_expected:
        return None
    if args.expected is not None:
        return Path(args.expected)
    return DEFAULT_EXPECTED if DEFAULT_EXPECTED.is_file() else None


def _expectations(args: argparse.Namespace) -> ExpectedFile | None:
    path = _expected_path(args)
    if path is None:
        return None
    if not path.is_file():
        raise UsageError(f"--expected {path}: no such file")
    return expected_file.read(path)


def _positionals(args: argparse.Namespace) -> list[Path]:
    if args.variants and (args.history or args.update_expected):
        raise UsageError(
            "--variants compares two variants of one run: not with --history or --update-expected"
        )
    want = 1 if (args.history or args.update_expected or args.variants) else 2
    if len(args.runs) != want:
        shape = "CANDIDATE" if want == 1 else "BASELINE CANDIDATE"
        raise UsageError(
            f"compare: expected {shape}, got {len(args.runs)} run director{'y' if len(args.runs) == 1 else 'ies'}"
        )
    if args.last < 1:
        raise UsageError("--last must be at least 1")
    return [Path(r) for r in args.runs]


def _update_expected(args: argparse.Namespace, candidate: Run) -> int:
    path = args.expected or DEFAULT_EXPECTED
    old = expected_file.read(path) if path.is_file() else None
    rows = updated_expected(old, candidate.records, today=date.today())
    expected_file.write(path, rows)
    print(f"wrote {path}: {len(rows)} rows from {candidate.run_id}")
    return 0


def _history_baseline(args: argparse.Namespace, candidate: Run) -> list[Run]:
    runs = load_comparable(args.db, candidate.manifest, last=args.last)
    if not runs:
        others = count_other_keys(args.db, candidate.manifest)
        raise UsageError(
            f"no comparable run before {candidate.run_id} in {args.db} ({others} runs on other hardware or settings)"
        )
    # The latest run whole (its samples back the rank test of a short history, its op
    # tables and numerics the deterministic findings), from its run directory when it is there.
    latest, why = runs[-1].in_full()
    if why:
        print(f"note: {why}", file=sys.stderr)
    return [h.as_run() for h in runs[:-1]] + [latest]


def _read(path: Path) -> Run:
    """A run with at least one record: an empty run is a failed run, never a clean compare."""
    run = read_run(path)
    if not run.records:
        raise UsageError(f"{path} has no records (the run wrote none): nothing to compare")
    return run


def _compare(args: argparse.Namespace, runs: list[Path]) -> Comparison | int:
    candidate = _read(runs[-1])
    if args.update_expected:
        return _update_expected(args, candidate)
    options = Options(thresholds=_thresholds(args), expected=_expectations(args))
    if args.history:
        return compare_history(_history_baseline(args, candidate), candidate, options)
    if args.variants:
        baseline, candidate = _variants(args.variants, candidate)
    else:
        baseline = _read(runs[0])
    differences = check_comparable(
        baseline, candidate, allow_different_hardware=args.allow_different_hardware
    )
    notes: list[str] = []
    if not differences and not args.no_remeasure:
        paired, notes = remeasure(
            baseline,
            candidate,
            plan=PairPlan(max_pairs=args.max_pairs),
            address=args.address,
            local=args.local,
        )
        options = replace(options, paired=paired)
    comparison = compare_runs(baseline, candidate, replace(options, compare_noisy=not differences))
    return replace(comparison, notes=(*comparison.notes, *notes))


def _variants(spec: str, run: Run) -> tuple[Run, Run]:
    """`--variants A,B`: variant A's cells against variant B's, both labelled B."""
    names = [n.strip() for n in spec.split(",")]
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise UsageError(
            f"--variants takes BASELINE,CANDIDATE (two different variant names), not {spec!r}"
        )
    base, candidate = names
    try:
        return variant_run(run, base, label=candidate), variant_run(run, candidate, label=candidate)
    except VariantError as exc:
        raise UsageError(str(exc)) from None


def _emit(args: argparse.Namespace, comparison: Comparison) -> None:
    markdown = to_markdown(comparison)
    if args.format == "json":
        print(json.dumps(to_json(comparison), indent=2))
    else:
        print(markdown, end="")
    if args.out is not None:
        write_outputs(comparison, args.out)
    append_step_summary(markdown)


def main(args: argparse.Namespace) -> int:
    runs = _positionals(args)
    if args.local and args.address:
        raise UsageError("--local re-measures without Ray: it cannot join --address")
    try:
        result = _compare(args, runs)
        if isinstance(result, int):
            return result
        _emit(args, result)
    except (RunDirError, HistoryError, CompareError, ExpectedFileError) as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{exc.filename or ''}: {exc.strerror}") from None
    if result.blocking and args.fail_on == "regression":
        print(f"{len(result.blocking)} blocking finding(s)", file=sys.stderr)
        return 1
    return 0
