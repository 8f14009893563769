"""Graph speed across exporters, measured in pairs while the run goes on (the protocol's
`pair_exporters`): as soon as every exporter's cell of a model (at one opset, device,
shape, dtype, ...) has its record, the graphs of the ok ones are timed together, the
fastest by its own p50 against each other, interleaved in one process with the node to
itself (harness.cell.paired, as `harness compare` times a changed graph), and each record
gets its exporter's speed against the fastest (`exporter_speed`). The graphs wait in the
run's store only until their pair is timed, unless the run keeps them (--keep-graphs).
Each group's speeds are written down (`LEDGER`) before its graphs go, so a run interrupted
after a pair keeps it, and its resume pairs the groups it had begun."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.store.details import ExporterSpeed
from harness.store.graphs import stored_model
from harness.store.paired import PairPlan, PairResult, PairTask
from harness.store.records import Cell, CellKey, Record

LEDGER = ".pairs.jsonl"  # each timed cell's speed: {"cell": cell id, "speed": {...}}
GroupKey = tuple[object, ...]  # a cell's key without its exporter
TimePairs = Callable[[Iterable[PairTask], Callable[[PairResult], None]], None]


def group_of(cell: Cell) -> GroupKey:
    return (cell.model, *cell.values)


def fastest_first(records: Iterable[Record]) -> list[Record]:
    """The group's ok cells with a latency, the fastest (lowest ORT p50) first."""
    timed = [r for r in records if r.passed and r.ort.latency is not None]
    return sorted(timed, key=lambda r: r.ort.latency.p50 if r.ort.latency else math.inf)


def speeds(first: Record, results: Mapping[str, PairResult]) -> dict[CellKey, ExporterSpeed]:
    """Each cell's speed against the fastest of its group. The pairs were timed against
    `first` (the fastest by its own p50); where a pair finds another faster still, every
    ratio is taken over that one's (its interval over the pair's estimate), and `first`'s
    is the inverse of its pair's."""
    timed = {e: r for e, r in results.items() if r.error is None and r.log_ratios}
    logs = {e: (r.estimate, r.low, r.high) for e, r in timed.items()}
    logs[first.exporter] = (0.0, 0.0, 0.0)
    fastest = min(logs, key=lambda e: logs[e][0])
    shift = logs[fastest][0]
    found: dict[CellKey, ExporterSpeed] = {}
    for exporter, (estimate, low, high) in logs.items():
        key = first.cell.replace(exporter=exporter).key
        if exporter == fastest:
            found[key] = ExporterSpeed(fastest=fastest, ratio=1.0)
        elif exporter == first.exporter:  # its own pair is the inverse of the fastest's
            pair = logs[fastest]
            found[key] = _speed(fastest, (-pair[0], -pair[2], -pair[1]), timed[fastest])
        else:
            found[key] = _speed(
                fastest, (estimate - shift, low - shift, high - shift), timed[exporter]
            )
    for exporter, result in results.items():
        if exporter not in timed:
            key = first.cell.replace(exporter=exporter).key
            failed = ExporterSpeed(fastest=fastest, error=result.error or "no pairs")
            found[key] = _with_time(failed, result)
    return found


def _speed(
    fastest: str, logs: tuple[float, float, float], result: PairResult | None
) -> ExporterSpeed:
    estimate, low, high = logs
    if result is None or (estimate, low, high) == (0.0, 0.0, 0.0):
        return ExporterSpeed(fastest=fastest, ratio=1.0)
    speed = ExporterSpeed(
        fastest=fastest,
        ratio=round(math.exp(estimate), 4),
        ci_low=round(math.exp(low), 4),
        ci_high=round(math.exp(high), 4),
        pairs=result.pairs,
        verdict=result.verdict,
    )
    return _with_time(speed, result)


def _with_time(speed: ExporterSpeed, result: PairResult) -> ExporterSpeed:
    """`speed` with what its pair took, of that its waits for the node, and what other
    cells did beside its timing."""
    return replace(
        speed,
        seconds=result.seconds or None,
        node_wait_s=result.node_wait_s or None,
        timed_beside=result.timed_beside or None,
    )


@dataclass
class ExporterPairs:
    """The run's groups of cells by model and axes, filled as records arrive; each full
    group's graphs timed in pairs in the background (one pair task at a time)."""

    run_dir: Path
    expected: dict[GroupKey, set[str]]
    time_pairs: TimePairs
    threads: int = 1
    keep_graphs: bool = False
    plan: PairPlan = field(default_factory=PairPlan)
    found: dict[GroupKey, dict[str, Record]] = field(default_factory=dict)
    pending: list[Future[None]] = field(default_factory=list)
    pool: ThreadPoolExecutor = field(default_factory=lambda: ThreadPoolExecutor(1))

    def observe(self, record: Record) -> None:
        group = group_of(record.cell)
        if group not in self.expected:
            return
        self.found.setdefault(group, {})[record.exporter] = record
        if set(self.found[group]) >= self.expected[group]:
            records = list(self.found.pop(group).values())
            self.pending.append(self.pool.submit(self._time_group, records))

    def _time_group(self, records: list[Record]) -> None:
        ranked = fastest_first(records)
        try:
            if len(ranked) >= 2:
                self._pair(ranked[0], ranked[1:])
        finally:
            if not self.keep_graphs:
                _forget_graphs(self.run_dir, records)

    def _pair(self, fastest: Record, others: list[Record]) -> None:
        base = stored_model(self.run_dir, fastest)
        tasks = {
            r.exporter: PairTask(
                r.cell.key, r.cell.label(), str(base), str(model), self.threads, self.plan
            )
            for r in others
            if base is not None and (model := stored_model(self.run_dir, r)) is not None
        }
        results: dict[str, PairResult] = {}
        by_key = {t.key: e for e, t in tasks.items()}
        self.time_pairs(tasks.values(), lambda res: results.__setitem__(by_key[res.key], res))
        ids = {r.cell.key: r.cell.cell_id for r in (fastest, *others)}
        found = speeds(fastest, results)
        _write_down(self.run_dir, {ids[key]: speed for key, speed in found.items()})

    def finish(self) -> None:
        """Wait for the pairs under way (their speeds are written down: `written_down`)."""
        for future in self.pending:
            future.result()
        self.pool.shutdown()


def _write_down(run_dir: Path, found: Mapping[str, ExporterSpeed]) -> None:
    from harness.store.files import append_inside

    lines = "".join(json.dumps({"cell": c, "speed": s.to_dict()}) + "\n" for c, s in found.items())
    fd = append_inside(run_dir, LEDGER)
    try:
        os.write(fd, lines.encode())
    finally:
        os.close(fd)


def written_down(run_dir: Path) -> dict[str, ExporterSpeed]:
    """The speeds of the pairs timed so far, by cell id (a torn last line: not timed)."""
    path = run_dir / LEDGER
    found: dict[str, ExporterSpeed] = {}
    for line in path.read_text().splitlines() if path.is_file() else ():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            entry = json.loads(line)
            found[entry["cell"]] = ExporterSpeed.from_dict(entry["speed"])
    return found


def _forget_graphs(run_dir: Path, records: list[Record]) -> None:
    """The group's stored graphs, kept for the pair alone, leave the run's store (and so
    do the folders they leave empty)."""
    for r in records:
        model = stored_model(run_dir, r)
        if model is None:
            continue
        shutil.rmtree(model.parent, ignore_errors=True)
        for folder in (model.parent.parent, model.parent.parent.parent):
            with contextlib.suppress(OSError):  # not empty: another entry is there
                folder.rmdir()
