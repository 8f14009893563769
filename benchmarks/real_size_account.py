"""Where a real-size run's wall time went, from its records: the span of its cells, how long
one or two cells were in flight, the timed phases (exports, latency loops, exporter pairs)
against the rest, split by how they hold the node (harness.cell.node): on cores of their
own (loops and pairs of fewer threads than the node's cores: other cells' work goes on
beside them, and how many did is counted), alone (loops on every core), and the exports,
one at a time.
The loops are estimates: their samples plus a warm-up of about two calls a side (the
records keep samples, not loop times); the pairs are their own seconds where the records
say them (sessions opened beside other cells' work included, their waits for the node left
out where the records say those), else estimates. A run written before 1-thread phases
took a core of their own held the node alone for all of them; one written between dba5e54
and 7915668 exported on a core of its own too, beside other exports; one written from then
until exports took turns on a core (issue 47, 2026-12-07) exported with the node alone.

    python -m benchmarks.real_size_account RUN_DIR
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Iterable, Iterator
from pathlib import Path

from harness.store import rundir
from harness.store.measures import Latency
from harness.store.records import Record


def in_flight(records: list[Record]) -> dict[int, float]:
    """Seconds with 0, 1, 2, ... cells running, over the span of the cells."""
    events = sorted(
        (t, step)
        for r in records
        if r.worker and r.worker.started_at and r.worker.finished_at
        for t, step in ((r.worker.started_at, 1), (r.worker.finished_at, -1))
    )
    seconds: dict[int, float] = {}
    running, last = 0, events[0][0] if events else 0.0
    for t, step in events:
        seconds[running] = seconds.get(running, 0.0) + t - last
        running, last = running + step, t
    return seconds


def loops(records: Iterable[Record]) -> Iterator[tuple[str, int, Latency]]:
    """Each latency loop's side and thread count (0: the record's), and what it timed; eager
    where the cell timed it itself (not where it took another cell's, `share_eager`), ORT
    where the cell did (not where its exporter pair did, `ort_from_pairs`: the pair's
    seconds count it)."""
    for r in records:
        own = [
            ("ORT", r.ort.latency if r.ort.timed_in is None else None),
            ("eager", r.eager.latency if r.eager.timed_by is None else None),
        ]
        for what, latency in own:
            if latency:
                yield f"{what} at the record's threads", 0, latency
        for threads, at in (r.thread_latency or {}).items():
            yield f"ORT at {threads} threads", int(threads), at.ort_latency_ms
            if at.eager_from is None:
                yield f"eager at {threads} threads", int(threads), at.eager_latency_ms


def loops_by_hold(records: Iterable[Record], cores: int, run_threads: int) -> tuple[float, float]:
    """The loops' seconds timed on cores of their own (fewer threads than the node's
    `cores`) and with the node alone; a record's own loops ran at the run's threads."""
    on_core = on_node = 0.0
    for _, threads, latency in loops(records):
        if (threads or run_threads) < cores:
            on_core += loop_seconds(latency)
        else:
            on_node += loop_seconds(latency)
    return on_core, on_node


def loop_seconds(latency: Latency) -> float:
    """A loop's calls, and its warm-up of about two calls (the records keep samples only)."""
    return (sum(latency.samples) + 2 * max(latency.samples, default=0.0)) / 1000


def loop_lines(records: list[Record]) -> list[str]:
    """Per kind of loop: the seconds of its calls, how many loops, their median calls."""
    kinds: dict[str, list[Latency]] = {}
    for kind, _, latency in loops(records):
        kinds.setdefault(kind, []).append(latency)
    return [
        f"  {kind}: {sum(sum(x.samples) for x in found) / 1000:.0f} s of calls in "
        f"{len(found)} loops, {statistics.median(len(x.samples) for x in found):g} calls each"
        f" (median)"
        for kind, found in sorted(kinds.items())
    ]


def pair_seconds(records: list[Record]) -> tuple[float, bool]:
    """The exporter pairs' time, and whether the records timed it: each pair's own seconds
    where they say them (`exporter_speed.seconds`), less its waits for the node where they
    say those (`node_wait_s`), else an estimate from their ABBA blocks over the graphs'
    p50s, warm-up too (runs written before the records said)."""
    speeds = [r.exporter_speed for r in records if r.exporter_speed]
    if any(s.seconds is not None for s in speeds):
        return sum((s.seconds or 0.0) - (s.node_wait_s or 0.0) for s in speeds), True
    by_model: dict[str, list[Record]] = {}
    for r in records:
        by_model.setdefault(r.cell.model, []).append(r)
    total = 0.0
    for group in by_model.values():
        pairs = max((r.exporter_speed.pairs or 0) if r.exporter_speed else 0 for r in group)
        p50s = [r.ort.latency.p50 for r in group if r.ort.latency]
        total += (2 * pairs + 2) * sum(p50s) / 1000 if pairs else 0.0
    return total, False


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    run_dir = Path(p.parse_args().run_dir)
    records = list(rundir.iter_records(run_dir))
    flight = in_flight(records)
    exports = sum((r.stage_s or {}).get("export", 0.0) for r in records)
    other = sum(
        v for r in records for k, v in (r.stage_s or {}).items() if k not in ("export", "latency")
    )
    manifest = rundir.read_manifest(run_dir)
    run_threads = (manifest.settings.threads if manifest.settings else None) or 1
    cores = manifest.hardware.cores or 1
    on_core, on_node = loops_by_hold(records, cores, run_threads)
    pairs, pairs_timed = pair_seconds(records)
    beside = sum(1 for r in records if r.worker and r.worker.timed_beside)
    print(f"{len(records)} cells over {sum(flight.values()):.0f} s; in flight: "
          + ", ".join(f"{n} for {s:.0f} s" for n, s in sorted(flight.items())))  # fmt: skip
    about = "" if pairs_timed else "~"
    print(f"timed on fewer than the node's {cores} cores: latency loops ~{on_core:.0f} s, "
          f"exporter pairs {about}{pairs:.0f} s: ~{on_core + pairs:.0f} s; "
          f"{beside} cells timed beside other cells' work")  # fmt: skip
    print(f"timed with the node alone: latency loops on every core ~{on_node:.0f} s")
    print(f"exports, one at a time: {exports:.0f} s")
    print("\n".join(loop_lines(records)))
    waits = [r.exporter_speed.node_wait_s for r in records if r.exporter_speed]
    if any(w is not None for w in waits):
        print(
            f"the pairs' waits for the node (not counted above): {sum(filter(None, waits)):.0f} s"
        )
    print(f"the other stages (build, reference, checker, sessions, ...): {other:.0f} s")


if __name__ == "__main__":
    main()
