"""Running a plan: plan -> dispatch -> store. `execute` starts a local Ray instance (or joins
`--address`), writes the manifest, runs every pending cell as a Ray task and writes each record
as it arrives; `execute_on` does the same on an instance already started (`harness bisect`
runs one plan per package version on one instance). The CLI (harness/commands/run.py) parses
the flags, calls `execute` and writes the report."""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from harness.dispatch.cluster import ClusterInfo, Runner
from harness.dispatch.policy import DispatchStats, Options
from harness.errors import UsageError
from harness.pipeline.pairing import (
    LEDGER,
    ExporterPairs,
    GroupKey,
    group_of,
    with_pair,
    written_down,
)
from harness.plan.build import RunPlan
from harness.plan.memory import largest_first, largest_node_gb, memory_need_gb
from harness.progress import Progress
from harness.store import rundir
from harness.store.amend import amend_records
from harness.store.axes import OrtOpt
from harness.store.graphs import RUN_STORE
from harness.store.manifest import (
    Cluster,
    DispatchSummary,
    Manifest,
    Settings,
    ZooProblem,
)
from harness.store.paired import PairPlan
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Status


def execute(plan: RunPlan, argv: list[str], *, stream: TextIO | None = None) -> Path:
    """Run every pending cell of the plan; returns the run directory. Ray's driver prints
    what its raylets report ("(raylet) A worker died ...") to sys.stdout from a thread of
    its own, and stdout is the summary table's: while Ray runs, stdout is stderr."""
    with contextlib.redirect_stdout(sys.stderr):
        return _execute(plan, argv, stream or sys.stderr)


def _execute(plan: RunPlan, argv: list[str], stream: TextIO) -> Path:
    _announce(plan, stream)
    if plan.options.local:
        from harness.dispatch import local

        return execute_on(local.runner(), plan, argv, stream=stream)
    from harness.dispatch import driver, session  # ray is imported only when a run starts

    cluster = session.start(plan.options.address, env_vars=harness_env())  # nothing written yet
    try:
        return execute_on(driver.runner(cluster), plan, argv, stream=stream)
    finally:
        session.stop()


def execute_on(
    runner: Runner, plan: RunPlan, argv: list[str], *, stream: TextIO | None = None
) -> Path:
    """Run every pending cell of the plan on a runner already started (`harness bisect`
    runs one plan per package version on one Ray instance); returns the run directory."""
    cluster = runner.cluster
    _check_threads(cluster, plan.options.threads)
    manifest = _manifest(plan, argv, runner)
    rundir.write_manifest(plan.run_dir, manifest)
    progress = Progress(total=len(plan.pending), stream=stream or sys.stderr)
    pairs = _exporter_pairs(plan, runner)
    with rundir.RecordWriter(plan.run_dir) as writer:

        def on_record(record: Record) -> None:
            spec = plan.specs.get(record.model)
            record = spec.judge(record) if spec else record  # expectations: judged here only
            if spec and spec.metadata:  # every record, a timeout's or a crash's too
                record = record.with_changes(metadata=dict(spec.metadata))
            writer.write(record)
            progress.update(record)
            if pairs is not None:
                pairs.observe(record)

        runnable = _skip_without_gpus(plan, plan.pending, cluster, on_record)
        runnable = _skip_unplaceable(plan, runnable, cluster, on_record)
        options = Options(plan.options.timeout_s, plan.options.threads, variants=plan.variants)
        tasks = _tasks(plan, runnable, manifest.max_memory_gb)
        stats = runner.run_tasks(tasks, on_record, options)
    if pairs is not None:
        _record_speeds(plan, pairs)
    finished = manifest.finished_with(
        DispatchSummary.from_dict(_dispatch_figures(stats)),
        tuple(stats.cold_starts),
    )
    rundir.write_manifest(plan.run_dir, finished)
    return plan.run_dir


def _exporter_pairs(plan: RunPlan, runner: Runner) -> ExporterPairs | None:
    """The run's exporter pairs where its protocol asks for them: each group of cells (a
    model at one opset, device, shape, ...) that two exporters or more run. A resumed run's
    records that no pair has timed yet are the groups' first (their graphs still wait)."""
    if not plan.protocol.pair_exporters:
        return None
    groups = _pair_groups(plan)
    # Judged every 10 pairs, more while "unknown" and the bound allows; a pair of long calls
    # stops at 5 once past the bound (10 at least held Whisper-small's, 2 s a call, 90 s
    # with the node to itself), while short calls keep 10 (5 of 60-ms calls gave a
    # ConvNeXt pair's ratio 1.39, interval 1.06-2.73, where 10 gave 1.06).
    budget = max(plan.protocol.max_time_s, 10.0)
    pairs = ExporterPairs(
        plan.run_dir,
        groups,
        runner.time_pairs,
        threads=plan.options.threads,
        keep_graphs=plan.options.keep_graphs is not None,
        ort_from_pairs=plan.protocol.ort_from_pairs,
        plan=PairPlan(min_pairs=5, round=10, max_s=budget),
    )
    timed = written_down(plan.run_dir)
    for record in rundir.iter_records(plan.run_dir) if plan.recorded else ():
        if record.exporter_speed is None and record.cell.cell_id not in timed:
            pairs.observe(record)
    return pairs


def _pair_groups(plan: RunPlan) -> dict[GroupKey, set[str]]:
    """The groups of the run's cells (a model at one opset, device, shape, ...) whose
    graphs are timed in pairs, with their exporters: where the protocol pairs exporters,
    those that two exporters or more run; none where it does not."""
    if not plan.protocol.pair_exporters:
        return {}
    expected: dict[GroupKey, set[str]] = {}
    for cell in plan.matrix.cells:
        expected.setdefault(group_of(cell), set()).add(cell.exporter)
    return {g: e for g, e in expected.items() if len(e) > 1}


def _record_speeds(plan: RunPlan, pairs: ExporterPairs) -> None:
    """Each paired cell's speed into its record, this attempt's pairs and an interrupted
    one's (graphs kept for the pairs alone are gone)."""
    pairs.finish()
    by_id = written_down(plan.run_dir)
    kept = plan.options.keep_graphs is not None
    amended = {
        r.cell.key: with_pair(r, by_id[r.cell.cell_id]).with_changes(
            artifacts=r.artifacts
            if kept
            else {k: v for k, v in r.artifacts.items() if k != "graph"},
        )
        for r in rundir.iter_records(plan.run_dir)
        if r.cell.cell_id in by_id
    }
    amend_records(plan.run_dir, amended)
    (plan.run_dir / LEDGER).unlink(missing_ok=True)  # each speed is in its record now


def _check_threads(cluster: ClusterInfo, threads: int) -> None:
    """Cells of `threads` CPUs that no node can hold would wait forever: a usage error."""
    if cluster.slots(threads).cpu == 0:
        largest = max(
            (n["resources"].get("CPU", 0) for n in cluster.nodes if n["alive"]), default=0
        )
        from harness.dispatch import local

        if cluster.address == local.ADDRESS:  # a --local run: this machine is its node
            raise UsageError(f"--threads {threads}: this machine has {largest:g} CPUs")
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


def _manifest(plan: RunPlan, argv: list[str], runner: Runner) -> Manifest:
    """The run's manifest, once the cluster is known: new, or the resumed run's own. Each
    variant's versions include those of the packages the variants ask for; each alive
    node's, the base environment's as its workers see them."""
    from harness.store.environment import requested_distributions, with_requested

    cluster = runner.cluster
    alive = [n["node_id"] for n in cluster.nodes if n["alive"]]
    per_node = runner.node_versions(alive)
    nodes = [{**n, "versions": per_node.get(n["node_id"], {})} for n in cluster.nodes]
    where = Cluster.from_dict(
        {"address": cluster.address, "nodes": nodes, "resources": cluster.resources}
    )
    asked = requested_distributions(plan.variants)
    found = runner.versions({"base": (), **plan.variants}, asked)
    versions = {name: with_requested(v) for name, v in found.items()}
    if plan.recorded:
        prior = rundir.read_manifest(plan.run_dir)
        return prior.resumed(cluster=where, versions=versions)
    memory = max_memory_gb(plan, cluster.slots(plan.options.threads).cpu)
    return Manifest.begin(
        run_id=plan.run_id,
        command=argv,
        suite=plan.suite_name,
        settings=Settings(
            threads=plan.options.threads,
            timeout_s=plan.options.timeout_s,
            keep_onnx=plan.options.keep_onnx,
            graph_store=_graph_store(plan, paired=bool(_pair_groups(plan))),
            protocol=plan.protocol.numbers(),
            latency_threads=plan.protocol.latency_threads,
            max_memory_gb=memory,
        ),
        matrix=plan.matrix.announcement,
        cells=len(plan.matrix),
        options=plan.options.to_dict(),
        zoo_problems=tuple(ZooProblem(source=p.source, error=p.error) for p in plan.zoo_problems),
        cluster=where,
        versions=versions,
    )


def _dispatch_figures(stats: DispatchStats) -> dict[str, object]:
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
    """The per-cell allowance: the flag, else the machine's share per slot."""
    from harness.store.environment import memory_share_gb

    if plan.options.max_memory_gb is not None:
        return plan.options.max_memory_gb
    return memory_share_gb(slots)


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


def _skip_unplaceable(
    plan: RunPlan, cells: list[Cell], cluster: ClusterInfo, on_record: Callable[[Record], None]
) -> list[Cell]:
    """Cells whose memory need (harness.plan.memory) is more than any node offers are
    recorded as skipped, saying both: placed anyway, they would take a node down."""
    largest = largest_node_gb([dict(n) for n in cluster.nodes])
    runnable = []
    for cell in cells:
        need = memory_need_gb(plan.specs[cell.model].metadata, cell.exporter)
        if need is None or largest is None or need <= largest:
            runnable.append(cell)
            continue
        reason = (
            f"needs {need:.1f} GB of memory (its weights and the {cell.exporter} export's"
            f" peak over them); the largest node offers {largest:.1f} GB"
        )
        on_record(Record.without_run(cell, plan.run_id, status=Status.SKIPPED, reason=reason))
    return runnable


def _tasks(plan: RunPlan, cells: list[Cell], max_memory: float | None) -> Iterator[CellTask]:
    """The cells as tasks, the largest models' first (harness.plan.memory.largest_first)."""
    paired = _pair_groups(plan)
    models = list(dict.fromkeys(c.model for c in cells))
    metadata = {m: plan.specs[m].metadata for m in models}
    rank = {m: i for i, m in enumerate(largest_first(models, metadata))}
    for cell in sorted(cells, key=lambda c: rank[c.model]):
        spec = plan.specs[cell.model]
        need = memory_need_gb(spec.metadata, cell.exporter)
        yield CellTask(
            cell=cell,
            source=spec.source,
            run_id=plan.run_id,
            run_dir=str(plan.run_dir.resolve()),
            threads=plan.options.threads,
            keep_onnx=plan.options.keep_onnx,
            protocol=_cell_protocol(plan.protocol, cell, paired=group_of(cell) in paired),
            max_memory_gb=_ceiling(plan, need, max_memory),
            memory_gb=need,
            timeout_s=plan.options.timeout_s,
            requires=spec.requires,
            graph_store=_graph_store(plan, paired=group_of(cell) in paired),
        )


def _cell_protocol(protocol: Protocol, cell: Cell, *, paired: bool) -> Protocol:
    """The protocol a cell is timed by: its ORT latency left to its pair (`ort_from_pairs`)
    only where a pair times it as the cell would: on the CPU, at ORT's default level."""
    timed_alike = cell.device == "cpu" and cell.ort_opt == OrtOpt.DEFAULT
    if protocol.ort_from_pairs and not (paired and timed_alike):
        return replace(protocol, ort_from_pairs=False)
    return protocol


def _ceiling(plan: RunPlan, need: float | None, share: float | None) -> float | None:
    """The cell's memory ceiling: --max-memory-gb where given; else its need where it is
    known and larger than the machine's share per slot, else that share."""
    if plan.options.max_memory_gb is not None or need is None:
        return share
    return max(need, share or 0.0)


def _graph_store(plan: RunPlan, *, paired: bool) -> str | None:
    """The folder of the content-addressed graph store, absolute (workers write to it):
    the run's own where its exporter pairs need the graphs and it keeps none, for the cells
    a pair times (`paired`): a cell no pair times keeps its graph only where the user asks
    (a real-size run of one exporter kept every graph: 2.3 GB for one Qwen3-0.6B cell)."""
    where = plan.options.keep_graphs
    if where is None and paired:
        where = "run"
    if where is None:
        return None
    return str((plan.run_dir / RUN_STORE if where == "run" else Path(where)).resolve())
