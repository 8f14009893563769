"""A submitted cell and its clock, and the start board its task reports to: plain data,
without Ray (`harness.dispatch.policy` decides with them, `harness.dispatch.remote` hosts
the board as an actor)."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from harness.store.details import WorkerInfo
from harness.store.records import CellTask, Record
from harness.store.status import Status


@dataclass(frozen=True)
class InFlight:
    """A submitted cell. Its clock starts when its task reports that it runs (`started`),
    not at submission: a cell waiting in Ray's queue is not running out of time."""

    task: CellTask
    flight_id: int
    submitted: float = field(default_factory=time.perf_counter)
    submitted_at: float = field(default_factory=time.time)
    started: float | None = None  # the driver's clock when the start report arrived
    started_at: float | None = None  # the worker's wall clock at its start
    node: str | None = None
    host: str | None = None
    pid: int | None = None

    def start(self, *, node: str, host: str, pid: int, at: float, now: float) -> InFlight:
        return replace(self, started=now, started_at=at, node=node, host=host, pid=pid)

    def assumed_started(self, now: float) -> InFlight:
        """Taken to run from `now` (where is unknown) unless known to run already."""
        return self if self.started is not None else replace(self, started=now)

    def expired(self, now: float, timeout_s: float) -> bool:
        return self.started is not None and now - self.started > timeout_s

    def ran_for(self, now: float) -> float:
        return now - (self.started if self.started is not None else self.submitted)

    def stamp(self, record: Record) -> Record:
        """Stamp submission and collection times beside the worker's own start and
        finish, so the scheduling overhead of every cell can be read off its record."""
        if record.worker is None:
            return record
        stamps = WorkerInfo(submitted_at=self.submitted_at, collected_at=time.time())
        return record.with_changes(worker=record.worker.with_facts(stamps))

    def whereabouts(self) -> WorkerInfo:
        """What the driver knows of where and when the cell ran, for a record it writes."""
        return WorkerInfo(
            node=self.node,
            host=self.host,
            pid=self.pid,
            submitted_at=self.submitted_at,
            started_at=self.started_at,
            collected_at=time.time(),
        )


# (flight id, node id, host, pid, the worker's wall clock)
Start = tuple[int, str, str, int, float]


def started(flights: Iterable[InFlight], starts: Iterable[Start], now: float) -> list[InFlight]:
    """The flights whose start reports arrived, with their clocks started at `now`."""
    by_id = {f.flight_id: f for f in flights}
    return [
        by_id[flight_id].start(node=node, host=host, pid=pid, at=at, now=now)
        for flight_id, node, host, pid, at in starts
        if flight_id in by_id
    ]


class StartBoard:
    """Where each task says that it started running, on which node and in which process
    (a Ray actor in `harness.dispatch.remote`). The driver drains it every poll: a cell's
    timeout clock starts then (a task still in Ray's queue is not running out of time),
    and a failed cell's node is known."""

    def __init__(self) -> None:
        self._starts: list[Start] = []

    def started(self, start: Start) -> None:
        self._starts.append(start)

    def drain(self) -> list[Start]:
        starts, self._starts = self._starts, []
        return starts


def no_run(
    task: CellTask,
    status: Status,
    reason: str,
    flight: InFlight | None = None,
    *,
    now: float | None = None,
) -> Record:
    """A record the driver writes for a cell that returned none; with what it knows of
    where and when the cell ran (until `now`, the driver's clock), where it was submitted."""
    record = Record.without_run(task.cell, task.run_id, status=status, reason=reason)
    record = record.with_changes(attempt=task.attempt)
    if flight is None:
        return record
    duration = flight.ran_for(time.perf_counter() if now is None else now)
    return record.with_changes(duration_s=duration, worker=flight.whereabouts())
