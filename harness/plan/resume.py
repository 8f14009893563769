"""`--resume DIR`: the plan of an interrupted run, re-made from its manifest's options,
with the cells it already recorded left out."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.plan.build import RunOptions, RunPlan, make_plan
from harness.store import rundir
from harness.store.axes import LIST_AXES
from harness.store.files import first_symlink
from harness.store.protocol import Protocol

# The flag of each option a resumed run takes from its manifest; `--address` may move the
# run to another cluster, every other flag must agree with the run being resumed.
FLAGS = {
    "suite": "--suite",
    "models": "--models",
    "exporters": "--exporters",
    "opsets": "--opsets",
    "devices": "--devices",
    "dynamic": "--dynamic/--static-only",
    "zoo": "--zoo",
    "out": "--out",
    "timeout_s": "--timeout",
    "threads": "--threads",
    "keep_onnx": "--keep-onnx",
    "keep_graphs": "--keep-graphs",
    "max_memory_gb": "--max-memory-gb",
    "variants": "--variant",
    "protocol": "--protocol",
}


def resume_plan(run_dir: Path, *, given: Mapping[str, Any] | None = None) -> RunPlan:
    """The same matrix and settings as the first attempt (a new `--address` may move it to
    another cluster); `given` holds the options named on the command line beside
    `--resume`, refused where they differ from the run's. A torn last line is cut off
    first so appending resumes cleanly."""
    given = dict(given or {})
    try:
        manifest = rundir.read_manifest(run_dir)
        options = RunOptions.from_dict(dict(manifest.options))
        if problem := conflict(options, given, run_dir):
            raise UsageError(f"--resume {run_dir}: {problem}")
        if link := first_symlink(run_dir):  # its workers would write through it
            raise UsageError(
                f"--resume {run_dir}: {link} is a symlink; a run never writes through one"
            )
        options = dataclasses.replace(options, out=str(run_dir), **_where(options, given))
        plan = make_plan(options, run_id=manifest.run_id or run_dir.name, resume=True)
        rundir.truncate_torn_tail(run_dir)
        recorded = frozenset(r.cell.key for r in rundir.iter_records(run_dir))
    except rundir.RunDirError as exc:
        raise UsageError(f"--resume: {exc}") from None
    return dataclasses.replace(plan, recorded=recorded)


def _where(options: RunOptions, given: Mapping[str, Any]) -> dict[str, Any]:
    """Where the resumed cells run: `--address` or `--local` as given now, else as before."""
    if given.get("address"):
        return {"address": given["address"], "local": False}
    if given.get("local"):
        return {"address": None, "local": True}
    return {"address": options.address, "local": options.local}


def conflict(recorded: RunOptions, given: Mapping[str, Any], run_dir: Path) -> str | None:
    """Why a flag named beside `--resume` cannot apply: it differs from the run's own
    setting (a resumed run keeps its matrix and settings, or its records would mix two)."""
    for name, flag in FLAGS.items():
        if name not in given:
            continue
        value, own = given[name], getattr(recorded, name)
        if name in ("out", "zoo"):
            value, own = _paths(value, run_dir), _paths(own, run_dir)
        if name == "protocol":  # the same keys and values however spaced or ordered
            value, own = _keys(value), _keys(own)
        if value != own:
            return _differs(flag, given[name], getattr(recorded, name))
    for axis in LIST_AXES:
        named = tuple((given.get("axes") or {}).get(axis.name, ()))
        if named and named != recorded.values(axis):
            return _differs(str(axis.flag), named, recorded.values(axis))
    return None


def _differs(flag: str, given: Any, own: Any) -> str:
    return (
        f"{flag} {_shown(given)} differs from the run being resumed ({_shown(own)}); a resumed"
        " run keeps its own settings: drop the flag, or start a new run"
    )


def _paths(value: Any, run_dir: Path) -> Any:
    if value is None:
        return run_dir.resolve()
    if isinstance(value, str):
        return Path(value).resolve()
    return tuple(Path(v).resolve() for v in value)


def _keys(protocol: str | None) -> dict[str, Any] | None:
    return None if protocol is None else Protocol.given_table(protocol, "--protocol")


def _shown(value: Any) -> str:
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value) or "none"
    return "default" if value is None else str(value)
