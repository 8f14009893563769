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
from typing import Any

from harness.store.details import ExporterSpeed, OrtRuntime, WorkerInfo
from harness.store.graphs import stored_model
from harness.store.measures import Latency
from harness.store.paired import PairPlan, PairResult, PairTask
from harness.store.records import Cell, CellKey, Record

LEDGER = ".pairs.jsonl"  # each timed cell's speed: {"cell": cell id, "speed": {...}}
GroupKey = tuple[object, ...]  # a cell's key without its exporter
TimePairs = Callable[[Iterable[PairTask], Callable[[PairResult], None]], None]


def group_of(cell: Cell) -> GroupKey:
    return (cell.model, *cell.values)


def fastest_first(records: Iterable[Record], *, untimed: bool = False) -> list[Record]:
    """The group's ok cells with a latency (with `untimed`, also those whose ORT latency
    their pair times: the protocol's ort_from_pairs), the fastest (lowest ORT p50) first,
    the untimed last."""
    timed = [r for r in records if r.passed and (untimed or r.ort.latency is not None)]
    return sorted(timed, key=lambda r: r.ort.latency.p50 if r.ort.latency else math.inf)


@dataclass(frozen=True)
class PairedTiming:
    """What a cell's pair gave its record: its graph's speed against the fastest exporter's
    (none for a graph timed alone, its model's other exporters having failed), and, where
    the cell left its ORT latency to the pair (the protocol's ort_from_pairs), its graph's
    calls there (ms), the runtime that ran them and what ran beside them on the node."""

    speed: ExporterSpeed | None = None
    ort_ms: tuple[float, ...] = ()
    runtime: dict[str, object] | None = None
    beside: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The ledger's entry: the keys that hold something."""
        entry = {
            "speed": self.speed.to_dict() if self.speed else None,
            "ort_ms": list(self.ort_ms),
            "runtime": self.runtime,
            "beside": list(self.beside),
        }
        return {k: v for k, v in entry.items() if v}

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> PairedTiming:
        speed = entry.get("speed")
        return cls(
            speed=ExporterSpeed.from_dict(speed) if speed else None,
            ort_ms=tuple(float(x) for x in entry.get("ort_ms", ())),
            runtime=entry.get("runtime"),
            beside=tuple(str(x) for x in entry.get("beside", ())),
        )


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
            inverse = (-pair[0], -pair[2], -pair[1])
            found[key] = _speed(fastest, inverse, timed[fastest], inverted=True)
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
    fastest: str,
    logs: tuple[float, float, float],
    result: PairResult | None,
    *,
    inverted: bool = False,
) -> ExporterSpeed:
    """A graph's speed from its pair's log-ratio; `inverted`: the pair timed the other
    graph against this one, so its verdict is read from this one's side."""
    estimate, low, high = logs
    if result is None or (estimate, low, high) == (0.0, 0.0, 0.0):
        return ExporterSpeed(fastest=fastest, ratio=1.0)
    speed = ExporterSpeed(
        fastest=fastest,
        ratio=round(math.exp(estimate), 4),
        ci_low=round(math.exp(low), 4),
        ci_high=round(math.exp(high), 4),
        pairs=result.pairs,
        verdict=_SIDE_SWAPPED.get(result.verdict, result.verdict) if inverted else result.verdict,
    )
    return _with_time(speed, result)


_SIDE_SWAPPED = {"slower": "faster", "faster": "slower"}


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
    ort_from_pairs: bool = False  # the protocol's: cells leave their ORT latency to the pair
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
        ranked = fastest_first(records, untimed=self.ort_from_pairs)
        try:
            if len(ranked) >= 2:
                self._pair(ranked[0], ranked[1:])
            elif ranked and ranked[0].ort.latency is None:
                self._alone(ranked[0])
        finally:
            if not self.keep_graphs:
                _forget_graphs(self.run_dir, records)

    def _pair(self, fastest: Record, others: list[Record]) -> None:
        base = stored_model(self.run_dir, fastest)
        tasks = {
            r.exporter: self._task(r, str(base), str(model))
            for r in others
            if base is not None and (model := stored_model(self.run_dir, r)) is not None
        }
        results = self._timed(tasks)
        found = speeds(fastest, results)
        timings = {r.cell.cell_id: PairedTiming(found.get(r.cell.key)) for r in (fastest, *others)}
        for r in (fastest, *others):
            if r.ort.latency is None and (sides := _sides(r, fastest, results)):
                result, ort_ms = sides
                timings[r.cell.cell_id] = _with_ort(timings[r.cell.cell_id], result, ort_ms)
        _write_down(self.run_dir, {c: t for c, t in timings.items() if t.speed or t.ort_ms})

    def _alone(self, record: Record) -> None:
        """The one ok cell of its model, whose ORT latency its pair was to time: its graph
        timed alone, as a pair times each of its two."""
        if (model := stored_model(self.run_dir, record)) is None:
            return
        result = self._timed({record.exporter: self._task(record, str(model), "")})
        found = result.get(record.exporter)
        if found and found.baseline_ms:
            timing = _with_ort(PairedTiming(), found, found.baseline_ms)
            _write_down(self.run_dir, {record.cell.cell_id: timing})

    def _task(self, record: Record, baseline: str, candidate: str) -> PairTask:
        cell = record.cell
        return PairTask(cell.key, cell.label(), baseline, candidate, self.threads, self.plan)

    def _timed(self, tasks: Mapping[str, PairTask]) -> dict[str, PairResult]:
        """Each task's result by its exporter."""
        results: dict[str, PairResult] = {}
        by_key = {t.key: e for e, t in tasks.items()}
        self.time_pairs(tasks.values(), lambda res: results.__setitem__(by_key[res.key], res))
        return results

    def finish(self) -> None:
        """Wait for the pairs under way (their speeds are written down: `written_down`)."""
        for future in self.pending:
            future.result()
        self.pool.shutdown()


def with_pair(record: Record, timing: PairedTiming) -> Record:
    """`record` with what its pair gave it: its speed, and, where it left its ORT latency
    to the pair, its graph's calls there, the runtime that ran them and what ran beside
    them (added to the record's `worker.timed_beside`)."""
    changed = record.with_changes(exporter_speed=timing.speed or record.exporter_speed)
    if not timing.ort_ms or record.ort.latency is not None:
        return changed
    runtime = OrtRuntime.from_dict(timing.runtime) if timing.runtime else record.ort.runtime
    ort = replace(
        record.ort,
        latency=Latency.from_samples(list(timing.ort_ms)),
        runtime=runtime,
        timed_in="pair" if timing.speed else "alone",
    )
    worker = record.worker or WorkerInfo()
    beside = tuple(dict.fromkeys((*(worker.timed_beside or ()), *timing.beside)))
    return changed.with_changes(ort=ort, worker=replace(worker, timed_beside=beside or None))


def _sides(
    record: Record, fastest: Record, results: Mapping[str, PairResult]
) -> tuple[PairResult, tuple[float, ...]] | None:
    """The pair that timed `record`'s graph, and its calls there: the fastest's in its
    first pair that ran, each other's in its own."""
    if record is not fastest:
        found = results.get(record.exporter)
        return (found, found.candidate_ms) if found and found.candidate_ms else None
    ran = [r for r in results.values() if r.baseline_ms]
    return (ran[0], ran[0].baseline_ms) if ran else None


def _with_ort(timing: PairedTiming, result: PairResult, ort_ms: tuple[float, ...]) -> PairedTiming:
    return replace(timing, ort_ms=ort_ms, runtime=result.runtime, beside=result.timed_beside)


def _write_down(run_dir: Path, found: Mapping[str, PairedTiming]) -> None:
    from harness.store.files import append_inside

    lines = "".join(json.dumps({"cell": c, **t.to_dict()}) + "\n" for c, t in found.items())
    fd = append_inside(run_dir, LEDGER)
    try:
        os.write(fd, lines.encode())
    finally:
        os.close(fd)


def written_down(run_dir: Path) -> dict[str, PairedTiming]:
    """What the pairs timed so far gave each cell, by cell id (a torn last line: not timed)."""
    path = run_dir / LEDGER
    found: dict[str, PairedTiming] = {}
    for line in path.read_text().splitlines() if path.is_file() else ():
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            entry = json.loads(line)
            found[entry["cell"]] = PairedTiming.from_dict(entry)
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
