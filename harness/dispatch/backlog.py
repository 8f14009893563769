"""The cells of a run not submitted yet, and which goes next: the first that fits a free
slot of its kind and the memory free beside the cells in flight (harness.dispatch.loop)."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from harness.dispatch.policy import CPU, GPU, Slots, kind
from harness.store.records import CellTask

HELD_MAX = 1000  # cells held back for a slot of their kind, at most


class Backlog:
    """The cells not submitted yet: new ones from the plan (pulled lazily, so a 10 000-cell
    run holds few), and those held back, for a slot of their kind or to run again."""

    def __init__(self, tasks: Iterable[CellTask], *, held_max: int = HELD_MAX) -> None:
        self._new = iter(tasks)
        self.exhausted = False
        self.held: dict[str, deque[CellTask]] = {GPU: deque(), CPU: deque()}
        self.held_max = held_max

    def __bool__(self) -> bool:
        return not self.exhausted or any(self.held.values())

    def again(self, task: CellTask) -> None:
        """A cell to run again (its node was lost): before any other of its kind."""
        self.held[kind(task)].appendleft(task)

    def next_fitting(
        self, slots: Slots, *, running: int, running_gpu: int, memory_free_gb: float = math.inf
    ) -> CellTask | None:
        """The next cell that fits a free slot and the memory free beside the cells in
        flight: held ones first, in order (CUDA before CPU: the GPU is the scarce resource),
        then new ones; a cell that does not fit is held with its kind, and the cells behind
        it that fit still go (a 4 GB model's second cell, waiting for the first's memory,
        left a core idle for two minutes while cells of 0.5 GB waited behind it)."""

        def fits(task: CellTask) -> bool:
            free_slot = slots.fits(kind(task), running=running, running_gpu=running_gpu)
            return free_slot and (task.memory_gb or 0.0) <= memory_free_gb

        for queue in self.held.values():
            if found := next((t for t in queue if fits(t)), None):
                queue.remove(found)
                return found
        while not self.exhausted and sum(map(len, self.held.values())) < self.held_max:
            task = next(self._new, None)
            if task is None:
                self.exhausted = True
                break
            if fits(task):
                return task
            self.held[kind(task)].append(task)
        return None
