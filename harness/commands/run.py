"""`harness run`: the flags, then `execute(plan)` (harness/pipeline/execute.py: plan ->
dispatch -> store), then the report."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path
from typing import Any

from harness.commands import name_list, repro
from harness.errors import UsageError
from harness.pipeline.execute import execute
from harness.plan.build import RunOptions, RunPlan, make_plan
from harness.plan.resume import resume_plan
from harness.store import lock, rundir
from harness.store.axes import LIST_AXES, Axis
from harness.store.files import WriteFailed
from harness.store.options import Shapes
from harness.store.protocol import Protocol
from harness.zoo.discovery import located

PROTOCOL_ENV = "HARNESS_PROTOCOL"

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


def _opsets(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in name_list(value))
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"--opsets takes integers like 17,18,20, not {value!r}"
        ) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_selection_arguments(p)
    p.add_argument("--out", metavar="DIR", help="the run directory (default: results/<run_id>/)")
    add_run_arguments(p)


def add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """The flags that choose the cells (`harness run`, and `harness bisect` as run's)."""
    p.add_argument(
        "--suite", metavar="NAME|PATH.toml", help="suite name (suites/NAME.toml) or a suite file"
    )
    p.add_argument(
        "--models",
        type=name_list,
        default=(),
        metavar="GLOB[,GLOB]",
        help="only these models (names, globs, tag:X, family:X, or hf:PATH_OR_REPO: a"
        " Hugging Face checkpoint)",
    )
    p.add_argument(
        "--exporters",
        type=name_list,
        default=(),
        metavar="LIST",
        help="dynamo,torchscript,torchscript-script,dynamo-legacy,transformers (default: the suite's)",
    )
    p.add_argument(
        "--opsets",
        type=_opsets,
        default=(),
        metavar="LIST",
        help="e.g. 17,18,20 (default: the suite's)",
    )
    p.add_argument(
        "--devices",
        type=name_list,
        default=(),
        metavar="LIST",
        help="cpu[,cuda] (default: the suite's)",
    )
    _add_shape_arguments(p)
    p.add_argument(
        "--zoo",
        action="append",
        default=[],
        metavar="PATH",
        help="a zoo entry file or folder (repeatable); without --suite, run only these models",
    )
    _add_axis_arguments(p)


def _add_axis_arguments(p: argparse.ArgumentParser) -> None:
    """One flag per list axis of the matrix (harness.store.axes: patch, dtype, ORT
    optimisation, ...), each naming the values to run."""
    for axis in LIST_AXES:
        p.add_argument(
            str(axis.flag),
            dest=_dest(axis),
            type=name_list,
            default=(),
            metavar="LIST",
            help=f"{axis.help} (default: the suite's, else {axis.text(axis.default)})",
        )


def _dest(axis: Axis[Any]) -> str:
    return f"axis_{axis.name}"


def _add_shape_arguments(p: argparse.ArgumentParser) -> None:
    """Static, dynamic or both: one of three flags."""
    shape = p.add_mutually_exclusive_group()
    shape.add_argument(
        "--dynamic",
        dest="dynamic",
        action="store_const",
        const=Shapes.BOTH,
        default=None,
        help="add dynamic-shape cells for models that declare dynamic dims",
    )
    shape.add_argument(
        "--static-only",
        dest="dynamic",
        action="store_const",
        const=Shapes.STATIC,
        help="static cells only",
    )
    shape.add_argument(
        "--dynamic-only",
        dest="dynamic",
        action="store_const",
        const=Shapes.ONLY,
        help="dynamic-shape cells only (models that declare no dynamic dims get none)",
    )


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    _add_output_arguments(p)
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="per-cell limit, from when the cell's process starts, less what it waits for its turn on the node (up to as long again); that process is killed and the cell recorded as timeout (default 600)",
    )
    p.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="CPU cores per cell, reserved in Ray and used by ORT and torch (default 1)",
    )
    p.add_argument(
        "--address",
        metavar="auto|HOST:PORT|ray://HOST:PORT",
        help="join an existing Ray cluster instead of starting a local instance",
    )
    p.add_argument(
        "--local",
        action="store_true",
        help="run the cells on this machine without Ray (each still in a process of its own,"
        " with its timeout and memory limit): for a laptop or a CI job where starting Ray"
        " costs more than the run; no --address or --variant",
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
        "old=onnxscript==0.6.2 (repeatable; the workers need pip access); entries starting"
        " with - are options of that pip, e.g. --no-index,--find-links=DIR",
    )
    p.add_argument(
        "--protocol",
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="latency measurement settings over the suite's [protocol] (docs/guide/suites.md),"
        " e.g. min_time_s=0.05,max_time_s=1 (default: $HARNESS_PROTOCOL, else the suite's)",
    )
    p.add_argument(
        "--resume", metavar="DIR", help="finish an interrupted run: only cells without a record run"
    )


def _add_output_arguments(p: argparse.ArgumentParser) -> None:
    """What a run keeps and writes beside its records."""
    p.add_argument(
        "--keep-onnx", action="store_true", help="keep each exported .onnx under artifacts/"
    )
    p.add_argument(
        "--keep-graphs",
        nargs="?",
        const="run",
        metavar="DIR",
        help="keep each ok cell's graph and inputs, by fingerprint, under the run's graphs/ or a"
        " folder DIR shared by runs (an unchanged graph is stored once), so that `harness"
        " compare` can time baseline and candidate graphs together",
    )
    p.add_argument(
        "--no-report", action="store_true", help="skip report.md/report.html/plots at the end"
    )
    repro.add_bound_argument(p)


def selection_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The `RunOptions` fields that `add_selection_arguments`' flags name (a flag left out
    names none)."""
    return _named({
        "suite": args.suite,
        "models": located(args.models),
        "exporters": args.exporters,
        "opsets": args.opsets,
        "devices": args.devices,
        "dynamic": args.dynamic,
        "zoo": tuple(str(Path(p).resolve()) for p in args.zoo),  # found again from anywhere
        "axes": {a.name: v for a in LIST_AXES if (v := getattr(args, _dest(a)))},
    })  # fmt: skip


def given_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `RunOptions` fields the command line names (a flag left out names none)."""
    return selection_from_args(args) | _named({
        "out": args.out,
        "timeout_s": args.timeout,
        "threads": args.threads,
        "keep_onnx": args.keep_onnx or None,
        "keep_graphs": args.keep_graphs,
        "address": args.address,
        "local": args.local or None,
        "max_memory_gb": args.max_memory_gb,
        "variants": tuple(args.variant),
        "protocol": args.protocol,
    })  # fmt: skip


def _named(given: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in given.items() if value not in (None, ())}


def options_from_args(args: argparse.Namespace) -> RunOptions:
    """A new run's options: the flags, `--protocol` from $HARNESS_PROTOCOL where not given
    (a resumed run keeps the protocol its first attempt recorded)."""
    given = given_options(args)
    if "protocol" not in given and (protocol := os.environ.get(PROTOCOL_ENV)):
        Protocol.given_table(protocol, f"${PROTOCOL_ENV}")  # its own mistakes, by its name
        given["protocol"] = protocol
    return RunOptions(**given)


def main(args: argparse.Namespace) -> int:
    _check_onnxruntime()
    run_dir = Path(args.resume) if args.resume else None
    try:
        if run_dir is not None:
            args = as_first_attempt(args, run_dir)
        bound = repro.bound(args.repro_bound)  # a bad value ends here, before the run
        if run_dir is not None:
            _resume(run_dir, args, bound)
        else:
            plan = make_plan(options_from_args(args))  # checked before anything is written
            run_dir = plan.run_dir
            with lock.holding(run_dir, create=True):
                _execute_and_finish(plan, args, bound)
    except WriteFailed as exc:  # a full disk: one line, and how to go on
        raise UsageError(_after_write_failure(exc, run_dir)) from None
    except rundir.RunDirError as exc:  # in use by another run, a symlink, not writable
        raise UsageError(str(exc)) from None
    return 0


def _after_write_failure(exc: WriteFailed, run_dir: Path | None) -> str:
    if run_dir is None or not rundir.manifest_path(run_dir).is_file():
        return str(exc)
    return (
        f"{exc}; the records written before it are kept: make room, then"
        f" `harness run --resume {run_dir}` runs the cells without one"
    )


def as_first_attempt(args: argparse.Namespace, run_dir: Path) -> argparse.Namespace:
    """A resumed run makes repros and a report as its first attempt asked: its command line
    (the manifest's, read by this command's own parser) gives `--repro-bound` unless given
    again, and `--no-report`."""
    if not rundir.manifest_path(run_dir).is_file():
        return args  # the resume itself says what is wrong with the directory
    first = _parsed(rundir.read_manifest(run_dir).command)
    bound = args.repro_bound if args.repro_bound is not None else first.get("repro_bound")
    no_report = args.no_report or bool(first.get("no_report"))
    return argparse.Namespace(**{**vars(args), "repro_bound": bound, "no_report": no_report})


def _parsed(command: tuple[str, ...]) -> dict[str, Any]:
    """A recorded `harness run ...` command line as this command's parser reads it; empty
    where it is not one or no longer parses (a flag this version does not know)."""
    if command[1:2] != ("run",):
        return {}
    parser = argparse.ArgumentParser(prog="harness run")
    add_arguments(parser)
    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit, UsageError):
        return vars(parser.parse_args(list(command[2:])))
    return {}


def _resume(run_dir: Path, args: argparse.Namespace, bound: float) -> None:
    """Finish an interrupted run, holding its directory's lock from before its torn last
    line is cut: two `--resume` of one run must not both run its pending cells."""
    if not run_dir.is_dir():
        raise UsageError(f"--resume {run_dir}: no such run directory")
    with lock.holding(run_dir):
        _execute_and_finish(resume_plan(run_dir, given=given_options(args)), args, bound)


def _execute_and_finish(plan: RunPlan, args: argparse.Namespace, bound: float) -> None:
    run_dir = execute(plan, list(args.command_line))
    if bound > 0:
        repro.after_run({n: spec.source for n, spec in plan.specs.items()}, run_dir, bound)
    _finish(run_dir, write_report=not args.no_report)


def _check_onnxruntime() -> None:
    """The cells need one onnxruntime build: say which extra installs it (exit 2), and
    warn where two builds overwrite each other's files."""
    from harness.store.environment import onnxruntime_clash, onnxruntime_missing

    if missing := onnxruntime_missing():
        raise UsageError(missing)
    if clash := onnxruntime_clash():
        print(f"warning: {clash}", file=sys.stderr)


def _finish(run_dir: Path, *, write_report: bool) -> None:
    from harness import report

    if write_report:
        for path in report.write_reports(run_dir):
            print(f"wrote {path}", file=sys.stderr)
    print(report.summary_table(rundir.read_records(run_dir)))
    print(f"run directory: {run_dir}")
