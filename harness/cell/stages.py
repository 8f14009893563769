"""Stage bookkeeping for a cell: each stage is timed, and any exception inside it becomes
a `StageFailure` naming the stage, which the worker turns into a record's status."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from harness.cell import node
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
# Where the block notes each outermost stage as it enters it (`clocked(notes=...)`): what
# a cell killed mid-stage (its timeout, its memory, a crash) leaves for its record.
_NOTES: ContextVar[Path | None] = ContextVar("stage_notes", default=None)


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
    if depth == 0:
        node.note_phase(name)  # for the cells that time beside this one
        if (notes := _NOTES.get()) is not None:
            with contextlib.suppress(OSError), notes.open("a") as f:
                f.write(f"{time.time()!r} {name}\n")
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
def clocked(notes: Path | None = None) -> Iterator[dict[str, float]]:
    """A clock of the block's stages: name -> seconds, in the order they first ran; with
    `notes`, each stage's start is also written there as it starts (`entered`)."""
    clock: dict[str, float] = {}
    token, noting = _CLOCK.set(clock), _NOTES.set(notes)
    try:
        yield clock
    finally:
        _CLOCK.reset(token)
        _NOTES.reset(noting)


def entered(notes: Path) -> dict[str, float]:
    """The stages a block's notes say it entered, in order, each with its seconds up to the
    next one's start (the last one's up to now); {} where it left none."""
    try:
        lines = notes.read_text().splitlines()
    except OSError:
        return {}
    starts: list[tuple[float, str]] = []
    for line in lines:
        with contextlib.suppress(ValueError):  # a line cut short by the kill
            at, name = line.split(" ", 1)
            starts.append((float(at), name))
    ends = [start for start, _ in starts[1:]] + [time.time()]
    spent: dict[str, float] = {}
    for (start, name), end in zip(starts, ends, strict=True):
        spent[name] = spent.get(name, 0.0) + end - start
    return spent
