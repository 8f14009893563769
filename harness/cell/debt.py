"""The debt search (`harness debt`): which of transformers' workarounds around torch.export
and torch.onnx (harness.cell.exporters.hf_debt) a `transformers` cell needs. The cell is run
again with every workaround on, watching which of them did something; then once without
each of those, one at a time, as the ORT optimizer search leaves one optimizer out. A
workaround without which the cell fails is needed (with that failure's signature); one
without which it passes is obsolete for this model at this torch and onnxscript.

Each search runs in a fresh process (the workarounds are process-wide registries):

    python -m harness.cell.debt JOB.json RESULT.json

JOB: the cell's record as written, its zoo file, the search's bound and the workarounds to
try (all the ones used when none are named). RESULT: the record's `workarounds`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.store.details import Workarounds, plain
from harness.store.records import CellTask, Record

DEFAULT_BOUND_S = 600.0


@dataclass(frozen=True)
class DebtJob:
    record: dict[str, Any]
    source: str
    bound_s: float = DEFAULT_BOUND_S
    only: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class StillFails(RuntimeError):
    """The cell fails with every workaround on: there is nothing to search."""


def search(job: DebtJob) -> Workarounds:
    """The cell with its workarounds observed, then without each used one in turn (in name
    order) until the bound is spent."""
    from harness.cell.exporters import hf_debt

    cell = Record.from_dict(job.record).cell
    start = time.monotonic()
    with hf_debt.observed() as used:
        base = _run(cell, job.source)
    if not base.passed:
        raise StillFails(f"the cell is {base.status} with every workaround on")
    tried: list[str] = []
    needed: dict[str, str] = {}
    for name in sorted(n for n in used if not job.only or n in job.only):
        if time.monotonic() - start > job.bound_s:
            break
        with hf_debt.disabled(name):
            without = _run(cell, job.source)
        tried.append(name)
        if not without.passed:
            needed[name] = without.error_signature or without.status.value
    seconds = round(time.monotonic() - start, 1)
    return Workarounds(tuple(sorted(used)), tuple(tried), needed, seconds, job.bound_s)


def _run(cell: Any, source: str) -> Record:
    """The cell run in this process, in a run directory of its own (its artifacts are the
    search's, not the run's)."""
    from harness.cell.worker import run_cell

    with tempfile.TemporaryDirectory(prefix="harness-debt-") as tmp:
        return run_cell(CellTask(cell, source, "debt", tmp))


def main(job_path: str, result_path: str) -> int:
    job = DebtJob(**json.loads(Path(job_path).read_text()))
    try:
        found: object = plain(search(job))
    except StillFails as exc:
        found = {"reason": str(exc)}
    Path(result_path).write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
