"""Records by task: the tasks a cell's head serves (the `transformers-tasks` zoo puts them in
its entries' metadata: `task`, the one it is named after, and `tasks`, every task whose
mapping names its class), and pass rates ("NN%, passing/total") the report, `harness
compare` and the nightly site count the same way: cells that exported and passed every
check, of the cells that apply (skipped ones left out)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from harness.store.records import Record


@dataclass(frozen=True)
class PassRate:
    passing: int
    total: int  # attempted cells (skipped ones left out)

    @property
    def percent(self) -> float:
        return 100.0 * self.passing / self.total if self.total else 0.0

    def text(self) -> str:
        return f"{self.percent:.0f}%, {self.passing}/{self.total}"


def pass_rate(records: Iterable[Record]) -> PassRate:
    applying = [r for r in records if r.status.applies]
    return PassRate(sum(r.status.exported for r in applying), len(applying))


def tasks_of(record: Record) -> tuple[str, ...]:
    """The tasks of the record's entry, the one it is named after first; () for a record
    of another zoo."""
    meta = record.metadata or {}
    tasks = meta.get("tasks")
    if isinstance(tasks, str) and tasks:
        return tuple(tasks.split(","))
    task = meta.get("task")
    return (task,) if isinstance(task, str) and task else ()


def by_task(records: Iterable[Record]) -> dict[str, list[Record]]:
    """Records per task, sorted by task; a record whose head serves two tasks counts in
    each."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        for task in tasks_of(r):
            groups[task].append(r)
    return dict(sorted(groups.items()))
