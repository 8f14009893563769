"""A run's progress on the terminal: one line per finished cell."""

from __future__ import annotations

import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TextIO

from harness.store.records import Record
from harness.store.status import Status


@dataclass
class Progress:
    """One line per finished cell on stderr: done/total, failures so far, elapsed."""

    total: int
    stream: TextIO = field(default_factory=lambda: sys.stderr)  # at call time: redirectable
    done: int = 0
    statuses: Counter[Status] = field(default_factory=Counter)
    started: float = field(default_factory=time.perf_counter)

    @property
    def failures(self) -> int:
        return sum(n for s, n in self.statuses.items() if not s.passing)

    def update(self, record: Record) -> None:
        self.done += 1
        self.statuses[record.status] += 1
        elapsed = time.perf_counter() - self.started
        took = f"{record.duration_s:.1f}s" if record.duration_s is not None else "-"
        width = len(str(self.total))
        print(
            f"[{self.done:>{width}}/{self.total}] {record.status:<17} {record.cell.label():<50} {took:>7}"
            f" | failures {self.failures} | {_clock(elapsed)}",
            file=self.stream,
            flush=True,
        )


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"
