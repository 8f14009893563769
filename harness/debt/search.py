"""The debt search (`harness debt`): which of transformers' workarounds around torch.export
and torch.onnx (harness.exporters.hf_debt) a `transformers` cell needs. The cell is run
again with every workaround on, watching which of them did something; then without them.
A workaround without which (alone) the cell fails is needed, with that failure's signature;
one without which it passes is obsolete for this model at this torch and onnxscript.

Most are obsolete, and a try is a whole cell, so the search tests groups: the workarounds an
earlier search of the run found needed (the job's `suspected`) alone first, then the others
all off together; where the cell passes without a group, every one in it is obsolete (they
can go together), where it fails the group is halved, down to one workaround alone (group
testing: a run of 16 with one needed takes 9 tries, not 16).

Each search runs in a process of its own, as a cell does (the workarounds are process-wide
registries): `answer` is the `Work` (harness.runtime.zygote) a child forked from a zygote
runs, given the cell's record as written, its zoo file, the search's bound and the
workarounds to try (all the ones used when none are named); it answers the record's
`workarounds`, or why there are none.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.store.details import Workarounds
from harness.store.protocol import VERDICT_ONLY
from harness.store.records import CellTask, Record

DEFAULT_BOUND_S = 600.0


@dataclass(frozen=True)
class DebtJob:
    record: dict[str, Any]
    source: str
    bound_s: float = DEFAULT_BOUND_S
    only: list[str] = field(default_factory=list)
    suspected: list[str] = field(default_factory=list)  # found needed elsewhere: tried alone


class StillFails(RuntimeError):
    """The cell fails with every workaround on: there is nothing to search."""


class _Spent(Exception):
    """The search's bound ran out: what is settled so far is its answer."""


Failure = str | None  # a try's failure signature; None: the cell passed


def settle(
    names: list[str], suspected: list[str], without: Callable[[list[str]], Failure]
) -> tuple[list[str], dict[str, str]]:
    """Which of `names` the cell needs, by group testing with `without(group)` (the cell run
    with that group off): the suspected alone first, then the rest together, halved where
    the cell fails. Returns the names settled (all unless `without` raised _Spent) and the
    needed ones with their failure."""
    tried: list[str] = []
    needed: dict[str, str] = {}

    def group(members: list[str], fails: bool = False) -> bool:
        """Settle `members`; True where the cell passed without all of them. `fails`: a
        larger group failed and its other half passed, so this one fails (not run again
        unless it is one workaround, whose failure is wanted)."""
        if not members:
            return True
        failure = "" if fails and len(members) > 1 else without(members)
        if failure is None:
            tried.extend(members)
            return True
        if len(members) == 1:
            tried.extend(members)
            needed[members[0]] = failure
            return False
        half = len(members) // 2
        group(members[half:], fails=group(members[:half]))
        return False

    with contextlib.suppress(_Spent):
        for name in (n for n in names if n in suspected):
            group([name])
        group([n for n in names if n not in suspected])
    return sorted(tried), needed


def search(job: DebtJob) -> Workarounds:
    """The cell with its workarounds observed, then without them (settle) until the bound
    is spent."""
    from harness.exporters import hf_debt

    cell = Record.from_dict(job.record).cell
    start = time.monotonic()
    with hf_debt.observed() as used:
        base = _run(cell, job.source)
    if not base.passed:
        raise StillFails(f"the cell is {base.status} with every workaround on")

    def without(group: list[str]) -> Failure:
        if time.monotonic() - start > job.bound_s:
            raise _Spent
        with hf_debt.disabled(*group):
            record = _run(cell, job.source)
        return None if record.passed else record.error_signature or record.status.value

    names = sorted(n for n in used if not job.only or n in job.only)
    tried, needed = settle(names, job.suspected, without)
    seconds = round(time.monotonic() - start, 1)
    return Workarounds(tuple(sorted(used)), tuple(tried), needed, seconds, job.bound_s)


def _run(cell: Any, source: str) -> Record:
    """The cell run in this process, in a run directory of its own (its artifacts are the
    search's, not the run's), for its verdict: its latency loops take one call (gemma2's
    decode search of two workarounds took 19.1 s at the default protocol, 14.9 s so)."""
    from harness.runtime.worker import run_cell

    with tempfile.TemporaryDirectory(prefix="harness-debt-") as tmp:
        return run_cell(CellTask(cell, source, "debt", tmp, protocol=VERDICT_ONLY))


def answer(job: DebtJob) -> Workarounds | str:
    """The search's answer, or why there is none (in a child of its own: a `Work`)."""
    try:
        return search(job)
    except StillFails as exc:
        return str(exc)
