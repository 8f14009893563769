"""The side of `harness bisect --isolation env` that runs inside a package set's environment
(`ENV/bin/python -m harness.bisect.child SPEC.json`, started by `harness.bisect.isolated`):
it checks that each requirement is there at the version asked and imports, then runs the
set's cells as `harness run --local` runs them (the same plan, `execute_on` over this
machine's runner, each cell in a process of its own) into the run directory the spec names.

The spec (JSON): `requirements`, `options` (the selection's `RunOptions`, its `out` the run
directory), `cells` (their ids), `run_id`, `argv` (the manifest's command line) and
`result`, a file this writes first: the probe's versions and, where the set cannot run,
why (`skipped`; exit 3, no cell run)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

UNUSABLE = 3


def probe(requirements: tuple[str, ...]) -> dict[str, Any]:
    """What this environment holds of the requirements, and why it cannot run them (None
    where it can)."""
    from harness.bisect.probe import unusable
    from harness.store.environment import distribution_status, versions

    found: dict[str, Any] = dict(versions())
    found["distributions"] = distribution_status(tuple(r.partition("==")[0] for r in requirements))
    return {"versions": found, "skipped": unusable(requirements, found)}


def run(spec: dict[str, Any]) -> Path:
    """The set's cells, run here as `harness run --local` runs them; the run directory."""
    from harness.dispatch import local
    from harness.pipeline.execute import execute_on
    from harness.plan.build import RunOptions, make_plan
    from harness.plan.matrix import Matrix

    plan = make_plan(RunOptions.from_dict(spec["options"]), run_id=spec["run_id"])
    wanted = set(spec["cells"])
    cells = tuple(c for c in plan.matrix.cells if c.cell_id in wanted)
    requirements = tuple(spec["requirements"])
    plan = replace(
        plan,
        matrix=Matrix(cells, f"{len(cells)} cells with {' '.join(requirements)}"),
        variants={"base": requirements},  # the manifest lists their versions (local: no variants)
    )
    return execute_on(local.runner(), plan, list(spec["argv"]), stream=sys.stderr)


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    found = probe(tuple(spec["requirements"]))
    Path(spec["result"]).write_text(json.dumps(found, default=str) + "\n")
    if found["skipped"]:
        return UNUSABLE
    run(spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
