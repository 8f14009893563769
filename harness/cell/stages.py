"""Stage bookkeeping for a cell: each stage is timed, and any exception inside it becomes
a `StageFailure` naming the stage, which the worker turns into a record's status."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

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


@contextmanager
def stage(name: str) -> Iterator[Timer]:
    """Time a stage; re-raise anything that goes wrong inside it as `StageFailure(name)`."""
    timer = Timer()
    start = time.perf_counter()
    try:
        yield timer
    except StageFailure:
        raise
    except Exception as exc:
        raise StageFailure(name, exc) from exc
    finally:
        timer.seconds = time.perf_counter() - start
