"""Which tasks regressed: a comparison's findings and both runs' pass rates per task (the
`transformers-tasks` suite's heads, whose records carry their tasks), for the tasks where
something changed."""

from __future__ import annotations

from dataclasses import dataclass

from harness.compare.comparison import Comparison
from harness.store.records import CellKey
from harness.store.tasks import PassRate, by_task, pass_rate

FIXED_KINDS = ("status_fixed", "better_than_expected")


@dataclass(frozen=True)
class TaskChange:
    task: str
    before: PassRate
    after: PassRate
    regressed: int  # the task's cells with a blocking finding
    fixed: int  # the task's cells that got better

    def to_dict(self) -> dict[str, object]:
        return {
            "task": self.task,
            "baseline": self.before.text(),
            "candidate": self.after.text(),
            "regressed": self.regressed,
            "fixed": self.fixed,
        }


def task_changes(c: Comparison) -> list[TaskChange]:
    """Per task whose pass rate moved or that has a regressed or fixed cell (against the
    newest baseline run); regressed tasks first."""
    before = by_task(c.baseline[-1].by_cell().values())
    after = by_task(c.candidate.by_cell().values())
    blocking = {f.cell.key for f in c.blocking if f.cell is not None}
    fixed = {f.cell.key for f in c.findings if f.cell is not None and f.kind in FIXED_KINDS}
    changes = []
    for task in sorted(set(before) | set(after)):
        keys: set[CellKey] = {r.cell.key for r in after.get(task, [])}
        change = TaskChange(
            task,
            pass_rate(before.get(task, [])),
            pass_rate(after.get(task, [])),
            len(keys & blocking),
            len(keys & fixed),
        )
        if change.regressed or change.fixed or change.before != change.after:
            changes.append(change)
    return sorted(changes, key=lambda t: (-t.regressed, t.task))
