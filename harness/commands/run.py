"""`harness run`: expand the matrix, run every cell as a Ray task, write the run directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import UsageError
from harness.plan.build import RunOptions, make_plan
from harness.store import rundir as store

HELP = "export, check and time a suite of models (the main job)"
DESCRIPTION = """\
Run a suite: every model x exporter x opset x device (x static/dynamic) cell is exported,
checked with onnx.checker, run in ONNX Runtime against eager PyTorch, and timed. Cells run
as Ray tasks on a local Ray instance started for the run (or --address to join a cluster).
Records are written to DIR/records.jsonl as cells finish; report.md/report.html at the end.

examples:
  harness run --suite smoke
  harness run --suite vision --exporters dynamo --opsets 18,20 --threads 2
  harness run --suite nlp --models 'bert*,gpt*' --out results/nlp-night
  harness run --zoo ./my_zoo --timeout 300
  harness run --resume results/20261122-130000-ab12      # finish an interrupted run
"""


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _opsets(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in _csv(value))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--opsets takes integers like 17,18,20, not {value!r}"
        ) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--suite", metavar="NAME|PATH.toml", help="suite name (suites/NAME.toml) or a suite file"
    )
    p.add_argument(
        "--models",
        type=_csv,
        default=(),
        metavar="GLOB[,GLOB]",
        help="only these models (names, globs, tag:X, family:X)",
    )
    p.add_argument(
        "--exporters",
        type=_csv,
        default=(),
        metavar="LIST",
        help="dynamo,torchscript,torchscript-script,dynamo-legacy (default: the suite's)",
    )
    p.add_argument(
        "--opsets",
        type=_opsets,
        default=(),
        metavar="LIST",
        help="e.g. 17,18,20 (default: the suite's)",
    )
    p.add_argument(
        "--devices", type=_csv, default=(), metavar="LIST", help="cpu[,cuda] (default: the suite's)"
    )
    shape = p.add_mutually_exclusive_group()
    shape.add_argument(
        "--dynamic",
        dest="dynamic",
        action="store_true",
        default=None,
        help="add dynamic-shape cells for models that declare dynamic dims",
    )
    shape.add_argument(
        "--static-only", dest="dynamic", action="store_false", help="static cells only"
    )
    p.add_argument(
        "--zoo",
        action="append",
        default=[],
        metavar="PATH",
        help="a zoo entry file or folder (repeatable); without --suite, run only these models",
    )
    p.add_argument("--out", metavar="DIR", help="the run directory (default: results/<run_id>/)")
    p.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="per-cell limit; the cell's worker is killed and the cell recorded as timeout (default 600)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="CPU cores per cell, reserved in Ray and used by ORT and torch (default 1)",
    )
    p.add_argument(
        "--keep-onnx", action="store_true", help="keep each exported .onnx under artifacts/"
    )
    p.add_argument(
        "--address",
        metavar="auto|HOST:PORT|ray://HOST:PORT",
        help="join an existing Ray cluster instead of starting a local instance",
    )
    p.add_argument(
        "--max-memory-gb",
        type=float,
        metavar="GB",
        help="memory a cell may allocate before it is recorded as oom (default: 90%% of the "
        "machine's memory divided by the cells that run at once)",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=PIP_SPEC[,PIP_SPEC]",
        help="also run every cell in a Ray runtime_env with these packages, e.g. "
        "old=onnxscript==0.6.2 (repeatable; the workers need pip access)",
    )
    p.add_argument(
        "--resume", metavar="DIR", help="finish an interrupted run: only cells without a record run"
    )
    p.add_argument(
        "--no-report", action="store_true", help="skip report.md/report.html/plots at the end"
    )


def options_from_args(args: argparse.Namespace) -> RunOptions:
    return RunOptions(
        suite=args.suite,
        models=args.models,
        exporters=args.exporters,
        opsets=args.opsets,
        devices=args.devices,
        dynamic=args.dynamic,
        zoo=tuple(args.zoo),
        out=args.out,
        timeout_s=args.timeout,
        threads=args.threads,
        keep_onnx=args.keep_onnx,
        address=args.address,
        max_memory_gb=args.max_memory_gb,
        variants=tuple(args.variant),
    )


def main(args: argparse.Namespace) -> int:
    from harness.commands.execute import execute

    argv = ["harness", *sys.argv[1:]]
    if args.resume:
        plan = _resume_plan(Path(args.resume), args)
    else:
        plan = make_plan(options_from_args(args))
    run_dir = execute(plan, argv, resume=bool(args.resume))
    _finish(run_dir, write_report=not args.no_report)
    return 0


def _resume_plan(run_dir: Path, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    try:
        manifest = store.read_manifest(run_dir)
    except store.RunDirError as exc:
        raise UsageError(f"--resume: {exc}") from None
    options = RunOptions.from_dict(manifest.get("options", {}))
    options = RunOptions.from_dict({**options.to_dict(), "out": str(run_dir)})
    if args.address:
        options = RunOptions.from_dict({**options.to_dict(), "address": args.address})
    return make_plan(options, run_id=manifest["run_id"], resume=True)


def _finish(run_dir: Path, *, write_report: bool) -> None:
    records = store.read_records(run_dir)
    try:
        from harness.report import core as report
    except ImportError:  # pragma: no cover - the report module ships with the harness
        report = None  # type: ignore[assignment]
    if report is not None:
        if write_report:
            for path in report.write_reports(run_dir):
                print(f"wrote {path}", file=sys.stderr)
        print(report.summary_table(records))
    print(f"run directory: {run_dir}")
