"""What one minimization is asked (a `Job`) and what it answers (a `Summary`): plain data,
no torch, pickled between the driver and the child a zygote forks to minimize (a `Work`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from harness.store.details import MinimalRepro

DEFAULT_BOUND_S = 60.0


@dataclass(frozen=True)
class Job:
    """Minimize the failure of one recorded cell (its record as written), within
    `bound_s` seconds, into the cell's artifacts folder under `run_dir`."""

    record: dict[str, Any]
    source: str  # the zoo file (or entry point) the cell's model comes from
    run_dir: str
    bound_s: float = DEFAULT_BOUND_S


@dataclass(frozen=True)
class Summary(MinimalRepro):
    """The record's `minimal_repro` as the minimizer makes it (how it was made and whether
    it reproduces in a fresh process: harness.store.details.MinimalRepro), with where its
    files are, relative to the run directory (they go to the record's artifacts)."""

    script: str | None = None
    inputs: str | None = None

    def as_record(self) -> MinimalRepro:
        """The summary without the paths, as the record holds it."""
        kept = {f.name: getattr(self, f.name) for f in fields(MinimalRepro)}
        return MinimalRepro(**kept)

    def artifacts(self) -> dict[str, str]:
        found = {"minimal_repro": self.script, "minimal_repro_inputs": self.inputs}
        return {k: v for k, v in found.items() if v}


def relative(path: Path, run_dir: str | Path) -> str:
    return str(path.resolve().relative_to(Path(run_dir).resolve()))
