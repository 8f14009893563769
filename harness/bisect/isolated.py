"""The shell of `harness bisect --isolation env`: each package set runs in a Python
environment of its own (`harness.bisect.environments`: made once under a cache folder, or
taken from a folder of environments made beforehand, and kept), its cells run there by
`harness.bisect.child` in a subprocess of that environment's Python, as `harness run
--local` runs them, one set after another; each set's run directory is read back and
compared with the good one as the Ray runner's are. Without Ray: torch itself can move.

A set whose environment cannot be made (pip cannot install it, no such environment in the
folder) or whose packages are not there at the version asked or do not import is skipped
with the reason, and no cell runs in it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

import harness
from harness.bisect.child import UNUSABLE
from harness.bisect.environments import Environment, Environments, base_site_dirs
from harness.bisect.sets import GRAPHS, RUNS, Attempt, ComparesSets, PackageSet, TimePairs
from harness.plan.build import RunPlan, new_run_id
from harness.store.runs import read_run


class EnvRunner(ComparesSets):
    """Runs package sets of the selected cells, each in its environment, into OUT/runs/,
    keeping every ok cell's graph in OUT/graphs (shared, content-addressed) for the paired
    timings, which run here, in this environment's onnxruntime, as the Ray runner's do."""

    def __init__(
        self,
        selection: RunPlan,
        out: Path,
        environments: Environments,
        *,
        stream: TextIO | None = None,
    ) -> None:
        self.selection, self.out, self.environments = selection, out, environments
        self.stream = stream or sys.stderr
        self.cells = {c.key: c for c in selection.matrix.cells}

    def __enter__(self) -> EnvRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run_sets(self, sets: Sequence[PackageSet]) -> list[Attempt]:
        """Each set in its environment, one after another (each run has the machine)."""
        return [self._run_set(s) for s in sets]

    def _run_set(self, s: PackageSet) -> Attempt:
        started = time.perf_counter()
        env = self.environments.get(s.requirements)
        if env.use is not None:
            how = "kept" if env.use.kept else f"made in {env.use.seconds:g} s"
            print(f"    {s.label}: environment {env.use.path} ({how})", file=self.stream)
        if env.python is None:
            return Attempt(s.label, s.requirements, skipped=env.reason, seconds=_since(started))
        run_dir = self._run_dir(s.variant)
        skipped = self._run_child(s, env, run_dir)
        attempt = Attempt(
            s.label,
            s.requirements,
            installs=env.installs,
            seconds=_since(started),
            environment=env.use,
        )
        if skipped is not None:
            return replace(attempt, skipped=skipped)
        relative = str(run_dir.relative_to(self.out))
        return replace(attempt, run=read_run(run_dir), run_dir=relative, variant="base")

    def _run_child(self, s: PackageSet, env: Environment, run_dir: Path) -> str | None:
        """The set's cells in its environment; why they could not run there, or None."""
        assert env.python is not None
        result = run_dir.with_name(f".{run_dir.name}.probe.json")
        spec = run_dir.with_name(f".{run_dir.name}.spec.json")
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text(json.dumps(self._spec(s, run_dir, result), default=str))
        command = [str(env.python), "-m", "harness.bisect.child", str(spec)]
        code = _relay(command, self.stream)
        if code == UNUSABLE:
            return str(json.loads(result.read_text()).get("skipped"))
        if code != 0 or not (run_dir / "records.jsonl").is_file():
            return f"its run exited {code} without records (the lines above say why)"
        return None

    def _spec(self, s: PackageSet, run_dir: Path, result: Path) -> dict[str, object]:
        options = replace(
            self.selection.options,
            out=str(run_dir.resolve()),
            local=True,
            address=None,
            keep_graphs=str((self.out / GRAPHS).resolve()),
        )
        return {
            "requirements": list(s.requirements),
            "options": options.to_dict(),
            "cells": [self.cells[k].cell_id for k in s.keys],
            "run_id": new_run_id(),
            "argv": ["harness", "bisect", "--isolation", "env", *s.requirements],
            "result": str(result.resolve()),
        }

    def _run_dir(self, name: str) -> Path:
        base = self.out / RUNS / name
        n, path = 1, base
        while path.exists():  # the same set again, for other cells
            n += 1
            path = base.with_name(f"{base.name}.{n}")
        return path

    def _time_pairs(self) -> TimePairs:
        from harness.dispatch import local

        return local.time_pairs


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 1)


def child_environ() -> dict[str, str]:
    """The child's environment variables: this one's, with this harness's source folder
    first on PYTHONPATH where it is a checkout (not a site-packages folder the overlay
    adds anyway, whose other packages would shadow the set's)."""
    environ = {**os.environ, "PYTHONUNBUFFERED": "1"}
    root = str(Path(harness.__file__).resolve().parent.parent)
    if root not in base_site_dirs():
        paths = [root, *(p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
        environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return environ


def _relay(command: list[str], stream: TextIO) -> int:
    """Run `command`, its output relayed to `stream` line by line, indented; its exit code."""
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_environ(),
        cwd=os.getcwd(),
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(f"      {line.rstrip()}", file=stream, flush=True)
        return proc.wait()
