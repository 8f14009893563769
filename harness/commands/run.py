"""`harness run`: plan the matrix, run every cell as a Ray task, write the run directory and
its report. The verb's core is `execute(plan)`: plan -> dispatch -> store, then report."""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from harness.commands import name_list, repro
from harness.dispatch.cluster import ClusterInfo
from harness.dispatch.policy import DispatchStats
from harness.errors import UsageError
from harness.plan.build import RunOptions, RunPlan, make_plan
from harness.plan.resume import resume_plan
from harness.progress import Progress
from harness.store import lock, rundir
from harness.store.files import WriteFailed
from harness.store.graphs import RUN_STORE
from harness.store.manifest import Manifest
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Status

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
        help="only these models (names, globs, tag:X, family:X)",
    )
    p.add_argument(
        "--exporters",
        type=name_list,
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
    p.add_argument(
        "--patches",
        type=name_list,
        default=(),
        metavar="LIST",
        help="export-time patches, each a value of the cells' patch axis: none (the plain"
        " call) and/or patches `harness list` names (default: the suite's, else none)",
    )


def _add_shape_arguments(p: argparse.ArgumentParser) -> None:
    """Static, dynamic or both: one of three flags."""
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
    shape.add_argument(
        "--dynamic-only",
        dest="dynamic",
        action="store_const",
        const="only",
        help="dynamic-shape cells only (models that declare no dynamic dims get none)",
    )


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    _add_output_arguments(p)
    p.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="per-cell limit, from when the cell's process starts; that process is killed and the cell recorded as timeout (default 600)",
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
        "models": args.models,
        "exporters": args.exporters,
        "opsets": args.opsets,
        "devices": args.devices,
        "dynamic": args.dynamic,
        "zoo": tuple(args.zoo),
        "patches": args.patches,
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
        "max_memory_gb": args.max_memory_gb,
        "variants": tuple(args.variant),
    })  # fmt: skip


def _named(given: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in given.items() if value not in (None, ())}


def options_from_args(args: argparse.Namespace) -> RunOptions:
    return RunOptions(**given_options(args))


def main(args: argparse.Namespace) -> int:
    _check_onnxruntime()
    bound = repro.bound(args.repro_bound)  # a bad value ends here, before the run
    run_dir = Path(args.resume) if args.resume else None
    try:
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


def _resume(run_dir: Path, args: argparse.Namespace, bound: float) -> None:
    """Finish an interrupted run, holding its directory's lock from before its torn last
    line is cut: two `--resume` of one run must not both run its pending cells."""
    if not run_dir.is_dir():
        raise UsageError(f"--resume {run_dir}: no such run directory")
    with lock.holding(run_dir):
        _execute_and_finish(resume_plan(run_dir, given=given_options(args)), args, bound)


def _execute_and_finish(plan: RunPlan, args: argparse.Namespace, bound: float) -> None:
    run_dir = execute(plan, ["harness", *sys.argv[1:]])
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


# -- the core: plan -> dispatch -> store -------------------------------------------------------


def execute(plan: RunPlan, argv: list[str], *, stream: TextIO = sys.stderr) -> Path:
    """Run every pending cell of the plan; returns the run directory. Ray's driver prints
    what its raylets report ("(raylet) A worker died ...") to sys.stdout from a thread of
    its own, and stdout is the summary table's: while Ray runs, stdout is stderr."""
    with contextlib.redirect_stdout(sys.stderr):
        return _execute(plan, argv, stream)


def _execute(plan: RunPlan, argv: list[str], stream: TextIO) -> Path:
    from harness.dispatch import session  # ray is imported only when a run really starts

    _announce(plan, stream)
    cluster = session.start(plan.options.address, env_vars=harness_env())  # nothing written yet
    try:
        return execute_on(cluster, plan, argv, stream=stream)
    finally:
        session.stop()


def execute_on(
    cluster: ClusterInfo, plan: RunPlan, argv: list[str], *, stream: TextIO = sys.stderr
) -> Path:
    """Run every pending cell of the plan on a Ray instance already started (`harness
    bisect` runs one plan per package version on one instance); returns the run directory."""
    from harness.dispatch import driver

    _check_threads(cluster, plan.options.threads)
    manifest = _manifest(plan, argv, cluster)
    rundir.write_manifest(plan.run_dir, manifest.to_dict())
    progress = Progress(total=len(plan.pending), stream=stream)
    with rundir.RecordWriter(plan.run_dir) as writer:

        def on_record(record: Record) -> None:
            spec = plan.specs.get(record.model)
            record = spec.judge(record) if spec else record  # expectations: judged here only
            if spec and spec.metadata:  # every record, a timeout's or a crash's too
                record = record.with_changes(metadata=dict(spec.metadata))
            writer.write(record)
            progress.update(record)

        runnable = _skip_without_gpus(plan, plan.pending, cluster, on_record)
        stats = driver.run_tasks(
            _tasks(plan, runnable, manifest.max_memory_gb),
            on_record,
            timeout_s=plan.options.timeout_s,
            threads=plan.options.threads,
            variants=plan.variants,
        )
    finished = manifest.finished_with(_dispatch_figures(stats), tuple(stats.cold_starts))
    rundir.write_manifest(plan.run_dir, finished.to_dict())
    return plan.run_dir


def _check_threads(cluster: ClusterInfo, threads: int) -> None:
    """Cells of `threads` CPUs that no node can hold would wait forever: a usage error."""
    if cluster.slots(threads).cpu == 0:
        largest = max(
            (n["resources"].get("CPU", 0) for n in cluster.nodes if n["alive"]), default=0
        )
        raise UsageError(
            f"--threads {threads}: no node of the Ray cluster has {threads} CPUs"
            f" (the largest has {largest:g})"
        )


def _announce(plan: RunPlan, stream: TextIO) -> None:
    print(plan.matrix.announcement, file=stream)
    if plan.recorded:
        print(
            f"resuming {plan.run_dir}: {len(plan.recorded)} cells already recorded, "
            f"{len(plan.pending)} to run",
            file=stream,
        )
    for problem in plan.zoo_problems:
        print(f"warning: zoo file {problem.source} failed to import: {problem.error}", file=stream)


def _manifest(plan: RunPlan, argv: list[str], cluster: ClusterInfo) -> Manifest:
    """The run's manifest, once the cluster is known: new, or the resumed run's own. Each
    variant's versions include those of the packages the variants ask for."""
    from harness.dispatch import remote
    from harness.store.environment import requested_distributions, with_requested

    where = {"address": cluster.address, "nodes": cluster.nodes, "resources": cluster.resources}
    asked = requested_distributions(plan.variants)
    found = remote.variant_versions({"base": (), **plan.variants}, distributions=asked)
    versions = {name: with_requested(v) for name, v in found.items()}
    if plan.recorded:
        prior = Manifest.from_dict(rundir.read_manifest(plan.run_dir))
        return prior.resumed(cluster=where, versions=versions)
    memory = max_memory_gb(plan, cluster.slots(plan.options.threads).cpu)
    return Manifest.begin(
        run_id=plan.run_id,
        command=argv,
        suite=plan.suite_name,
        settings={
            "threads": plan.options.threads,
            "timeout_s": plan.options.timeout_s,
            "keep_onnx": plan.options.keep_onnx,
            "graph_store": _graph_store(plan),
            "protocol": vars(plan.protocol),
            "max_memory_gb": memory,
        },
        matrix=plan.matrix.announcement,
        cells=len(plan.matrix),
        options=plan.options.to_dict(),
        zoo_problems=[vars(p) for p in plan.zoo_problems],
        cluster=where,
        versions=versions,
    )


def _dispatch_figures(stats: DispatchStats) -> dict[str, Any]:
    wall = time.perf_counter() - stats.started
    return {
        "submitted": stats.submitted,
        "completed": stats.completed,
        "retried": stats.retried,
        "max_in_flight": stats.max_in_flight,
        "peak_in_flight": stats.peak_in_flight,
        **stats.figures(),
        "driver_peak_rss_mb": driver_peak_rss_mb(),
        "wall_s": round(wall, 3),
        "cells_per_minute": round(stats.completed / max(1e-9, wall) * 60, 2),
    }


def driver_peak_rss_mb() -> float:
    """This process's peak RSS so far (the kernel's high-water mark), in MiB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def harness_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """HARNESS_* variables of the driver, passed on to every worker (also on a cluster)."""
    return {k: v for k, v in (environ or dict(os.environ)).items() if k.startswith("HARNESS_")}


def max_memory_gb(plan: RunPlan, slots: int) -> float | None:
    """The per-cell allowance: the flag, else 90% of the machine shared by the slots."""
    from harness.store.environment import hardware

    if plan.options.max_memory_gb is not None:
        return plan.options.max_memory_gb
    machine_gb = hardware().get("memory_gb")
    if not machine_gb:
        return None
    return round(machine_gb * 0.9 / max(1, slots), 2)


def _skip_without_gpus(
    plan: RunPlan, cells: list[Cell], cluster: ClusterInfo, on_record: Callable[[Record], None]
) -> list[Cell]:
    """CUDA cells where no node has a GPU (and the CPUs of --threads beside it) are
    recorded as skipped, not left unschedulable."""
    if cluster.slots(plan.options.threads).gpu > 0:
        return cells
    reason = "no GPU in the Ray cluster"
    if cluster.has_gpus:
        reason = f"no GPU node of the Ray cluster has {plan.options.threads} CPUs (--threads)"
    for cell in (c for c in cells if c.device == "cuda"):
        on_record(Record.without_run(cell, plan.run_id, status=Status.SKIPPED, reason=reason))
    return [c for c in cells if c.device != "cuda"]


def _tasks(plan: RunPlan, cells: list[Cell], max_memory: float | None) -> Iterator[CellTask]:
    for cell in cells:
        yield CellTask(
            cell=cell,
            source=plan.specs[cell.model].source,
            run_id=plan.run_id,
            run_dir=str(plan.run_dir.resolve()),
            threads=plan.options.threads,
            keep_onnx=plan.options.keep_onnx,
            protocol=plan.protocol,
            max_memory_gb=max_memory,
            timeout_s=plan.options.timeout_s,
            requires=plan.specs[cell.model].requires,
            graph_store=_graph_store(plan),
        )


def _graph_store(plan: RunPlan) -> str | None:
    """The folder of the content-addressed graph store, absolute (workers write to it)."""
    where = plan.options.keep_graphs
    if where is None:
        return None
    return str((plan.run_dir / RUN_STORE if where == "run" else Path(where)).resolve())
