"""`--resume DIR`: the plan of an interrupted run, re-made from its manifest's options,
with the cells it already recorded left out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.errors import UsageError
from harness.plan.build import RunOptions, RunPlan, make_plan
from harness.store import rundir


def resume_plan(run_dir: Path, *, address: str | None = None) -> RunPlan:
    """The same matrix and settings as the first attempt (a new `--address` may move it to
    another cluster); a torn last line is cut off first so appending resumes cleanly."""
    try:
        manifest = rundir.read_manifest(run_dir)
    except rundir.RunDirError as exc:
        raise UsageError(f"--resume: {exc}") from None
    options = RunOptions.from_dict(manifest.get("options", {}))
    options = dataclasses.replace(options, out=str(run_dir), address=address or options.address)
    plan = make_plan(options, run_id=manifest["run_id"], resume=True)
    rundir.truncate_torn_tail(run_dir)
    recorded = frozenset(r.cell.key for r in rundir.iter_records(run_dir))
    return dataclasses.replace(plan, recorded=recorded)
