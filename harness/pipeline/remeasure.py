"""Re-measuring a comparison's changed cells: each changed cell's two kept graphs timed
together in interleaved pairs, one Ray task per cell (`harness compare`, and the nightly
comparison in scripts/nightly_compare.py)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from harness.compare.paired import pair_tasks
from harness.store.paired import PairPlan, PairResult, PairTask
from harness.store.records import CellKey
from harness.store.runs import Run


def remeasure(
    baseline: Run,
    candidate: Run,
    *,
    plan: PairPlan,
    address: str | None = None,
    local: bool = False,
) -> tuple[dict[CellKey, PairResult], list[str]]:
    """Time each changed cell's two kept graphs together (one Ray task per cell, on the
    candidate's threads; with `local`, a process per cell on this machine, without Ray);
    the results, and a note saying what was done."""
    settings = candidate.manifest.settings
    threads = (settings and settings.threads) or 1
    tasks, missing = pair_tasks(baseline, candidate, threads=threads, plan=plan)
    lacking = f"; {missing} changed cells without both graphs kept" if missing else ""
    if not tasks:
        return {}, [f"no changed graph re-measured in pairs{lacking}"] if missing else []
    print(f"re-measuring {len(tasks)} changed cells in interleaved pairs", file=sys.stderr)
    results: dict[CellKey, PairResult] = {}
    start = time.perf_counter()
    _time_pairs(tasks, lambda r: results.__setitem__(r.key, r), address=address, local=local)
    per_cell = sum(r.seconds for r in results.values()) / len(results)
    note = (
        f"{len(tasks)} changed cells re-measured in interleaved pairs ({per_cell:.1f} s per cell,"
        f" {time.perf_counter() - start:.0f} s in all){lacking}"
    )
    return results, [note]


def _time_pairs(
    tasks: list[PairTask],
    on_result: Callable[[PairResult], None],
    *,
    address: str | None,
    local: bool,
) -> None:
    if local:
        from harness.dispatch import local as on_this_machine

        on_this_machine.time_pairs(tasks, on_result)
        return
    from harness.dispatch import driver, session

    session.start(address)
    try:
        driver.time_pairs(tasks, on_result)
    finally:
        session.stop()
