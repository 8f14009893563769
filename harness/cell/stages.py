"""Stage bookkeeping for a cell: each stage is timed, and any exception inside it becomes
a `StageFailure` naming the stage, which the worker turns into a record's status."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from harness.store.status import Stage


class StageFailure(Exception):
    """An exception raised inside a named stage of a cell."""

    def __init__(self, stage: str, error: BaseException) -> None:
        super().__init__(f"{stage}: {type(error).__name__}: {error}")
        self.stage = Stage(stage)
        self.error = error
        # What the failing stage still learned (e.g. the ATen ops of a captured graph
        # whose translation failed), for the record.
        self.details: dict[str, object] = {}


class Timer:
    def __init__(self) -> None:
        self.seconds = 0.0


# Where a cell's time goes, stage by stage (`clocked`): each outermost stage adds its
# seconds under its name; a stage inside another (the exporter's translate inside the
# export) is its outer stage's time.
_CLOCK: ContextVar[dict[str, float] | None] = ContextVar("stage_clock", default=None)
_DEPTH: ContextVar[int] = ContextVar("stage_depth", default=0)


@contextmanager
def stage(name: str) -> Iterator[Timer]:
    """Time a stage; re-raise anything that goes wrong inside it as `StageFailure(name)`."""
    with timed(name) as timer:
        try:
            yield timer
        except StageFailure:
            raise
        except Exception as exc:
            raise StageFailure(name, exc) from exc


@contextmanager
def timed(name: str) -> Iterator[Timer]:
    """Time a part of the cell under `name` on the cell's clock (where one runs)."""
    timer, depth = Timer(), _DEPTH.get()
    token = _DEPTH.set(depth + 1)
    start = time.perf_counter()
    try:
        yield timer
    finally:
        timer.seconds = time.perf_counter() - start
        _DEPTH.reset(token)
        clock = _CLOCK.get()
        if clock is not None and depth == 0:
            clock[name] = clock.get(name, 0.0) + timer.seconds


@contextmanager
def clocked() -> Iterator[dict[str, float]]:
    """A clock of the block's stages: name -> seconds, in the order they first ran."""
    clock: dict[str, float] = {}
    token = _CLOCK.set(clock)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)
