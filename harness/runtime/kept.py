"""Zygotes kept for the next user in this process, where a process makes many runs and
checks their verdicts, not their timings (the harness's own tests).

Set KEEP_ENV to 1 (tests/conftest.py does, and skips the warm-up): the zygotes a local run
(`harness.dispatch.local`) or work on a run's cells (repro's minimizer, debt's search:
`ZygotePool` below) started are kept when it ends, for the next of either in this process
under the same environment, working folder and import path, instead of each spawning its
own (a fresh interpreter importing torch and measuring each exporter's cold start: seconds
a zygote). A kept zygote has paid its cold start, so the next run's records carry none.
Ignored unless the warm-up is skipped: a run whose timings count starts as a user's does.

Where KEEP_ENV is set, a local run's cells run one at a time (`one_at_a_time`): those
processes check verdicts and records, not throughput, and a run then needs one set of
zygotes rather than one per core (each a cold start of its own), kept or not (a run with the
warm-up on starts its own). Where zygotes are kept, its cells and the work's calls run on
this module's one thread (`thread`): a zygote dies with the thread that started it
(`die_with_parent` is per thread), and those started on that thread, which lives as long as
the process, are kept."""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
from pathlib import Path
from queue import SimpleQueue

from harness.runtime.zygote import Done, Given, Made, Work, Zygotes

KEEP_ENV = "HARNESS_KEEP_ZYGOTES"
# Not part of the key: pytest's name of the test running (each its own), and what a library
# sets in the process that imports it (onnxruntime_genai: ORT_LIB_PATH), as a zygote that
# imports it does alike. Seen: the first in-process import of a library orphaned every
# zygote kept so far.
_IGNORED_ENV = {"PYTEST_CURRENT_TEST", "ORT_LIB_PATH"}
# At most this many sets are kept (each a process holding torch), the last kept: a test
# that sets an environment of its own leaves its zygotes behind, never to be taken again.
MOST_KEPT = 6
_stash: list[tuple[tuple[object, ...], Zygotes]] = []  # oldest first
_thread: list[concurrent.futures.ThreadPoolExecutor] = []  # made on first use
_lock = threading.Lock()


def key() -> tuple[object, ...] | None:
    """What a kept zygote must share with the run that takes it (it inherited them when it
    was spawned), or None where zygotes are not kept."""
    if os.environ.get(KEEP_ENV) != "1":
        return None
    from harness.runtime.warmup import SKIP_ENV  # imports torch: only where zygotes are kept

    if os.environ.get(SKIP_ENV) != "1":
        return None
    environment = {k: v for k, v in os.environ.items() if k not in _IGNORED_ENV}
    return tuple(sorted(environment.items())), os.getcwd(), tuple(sys.path)


def one_at_a_time() -> bool:
    """Whether a local run's cells run one at a time: where KEEP_ENV is set."""
    return os.environ.get(KEEP_ENV) == "1"


def thread() -> concurrent.futures.ThreadPoolExecutor:
    """This process's one kept thread, which lives as long as the process: the zygotes it
    starts can be kept."""
    with _lock:
        if not _thread:
            _thread.append(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kept"))
        return _thread[0]


def take(where: tuple[object, ...] | None) -> Zygotes | None:
    """A kept set of zygotes for the environment `where` (a `key()`), if one is idle."""
    with _lock:
        for index in reversed(range(len(_stash))):
            if _stash[index][0] == where:
                return _stash.pop(index)[1]
    return None


def release(where: tuple[object, ...] | None, zygotes: Zygotes) -> None:
    """Keep `zygotes` (started on `thread`) for the next taker under `where` (a `key()`),
    shutting the oldest kept set down past MOST_KEPT; shut them down themselves where
    nothing is kept (None) or they were stopped."""
    if where is None or zygotes.stopped:
        zygotes.close()
        return
    with _lock:
        _stash.append((where, zygotes))
        surplus = _stash[:-MOST_KEPT]
        del _stash[:-MOST_KEPT]
    for _, oldest in surplus:
        oldest.close()


class ZygotePool:
    """Zygotes for threads that call `Work` at once: each call borrows an idle set (a kept
    one, or a new one where none is idle), so there are at most as many as calls ran
    together. Close it once its calls are done, from the process whose threads made them.
    Where zygotes are kept, the calls run on this module's thread and `close` keeps them."""

    def __init__(self, log: Path | None = None) -> None:
        self.log = log
        self.where = key()
        self.idle: SimpleQueue[Zygotes] = SimpleQueue()
        self.every: list[Zygotes] = []

    def call(self, work: Work[Given, Made]) -> Done[Made]:
        if self.where is None:
            return self._call(work)
        return thread().submit(self._call, work).result()

    def _call(self, work: Work[Given, Made]) -> Done[Made]:
        zygotes = self.idle.get() if not self.idle.empty() else self._fresh()
        try:
            return zygotes.call(work)
        finally:
            self.idle.put(zygotes)

    def _fresh(self) -> Zygotes:
        zygotes = take(self.where) or Zygotes()
        zygotes.log = self.log
        self.every.append(zygotes)
        return zygotes

    def close(self) -> None:
        for zygotes in self.every:
            release(self.where, zygotes)
