"""What one minimization is asked (a `Job`) and what it answers (a `Summary`): plain data,
no torch, passed as JSON between the driver and the fresh process that minimizes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

DEFAULT_BOUND_S = 60.0


@dataclass(frozen=True)
class Job:
    """Minimize the failure of one recorded cell (its record as written), within
    `bound_s` seconds, into the cell's artifacts folder under `run_dir`."""

    record: dict[str, Any]
    source: str  # the zoo file (or entry point) the cell's model comes from
    run_dir: str
    bound_s: float = DEFAULT_BOUND_S

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        return cls(**json.loads(text))


@dataclass(frozen=True)
class Summary:
    """The record's `minimal_repro`: how the repro was made and whether it reproduces in a
    fresh process (`reproduces`: None where no script was made or run)."""

    kind: str  # export | check | ort_session | ort_run | numerics | capture
    method: str  # what made it: graph (delta debugging over a program), module, or none
    reproduces: bool | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    tests: int | None = None  # candidates exported and judged
    search_complete: bool | None = None  # 1-minimal, not stopped by the bound
    seconds: float | None = None  # the minimizer's own clock (the search is bounded)
    bound_s: float | None = None
    wall_s: float | None = None  # its process, start to end, as the driver timed it
    target: str | None = None  # the error signature, or the node whose value is wrong
    imports: list[str] = field(default_factory=list)  # modules loaded to define custom ops
    reason: str | None = None  # why no repro, or what to know about this one
    verify: dict[str, Any] | None = None  # the fresh-process run: exit code, seconds, last line
    # The module-level minimizer's (method "module"): the submodule kept, by its path in
    # the model ("model.layers.13.mlp"), its class, parameters and tree depth before (the
    # model) and after, and the repeated items inside it replaced by identity.
    module: str | None = None
    module_class: str | None = None
    params_before: int | None = None
    params_after: int | None = None
    depth_before: int | None = None
    depth_after: int | None = None
    replaced: list[str] | None = None
    script: str | None = None  # relative to the run directory
    inputs: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Summary:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    def record_fields(self) -> dict[str, Any]:
        """The summary without the paths (they go to the record's artifacts)."""
        return {k: v for k, v in self.to_dict().items() if k not in ("script", "inputs")}

    def artifacts(self) -> dict[str, str]:
        found = {"minimal_repro": self.script, "minimal_repro_inputs": self.inputs}
        return {k: v for k, v in found.items() if v}


def relative(path: Path, run_dir: str | Path) -> str:
    return str(path.resolve().relative_to(Path(run_dir).resolve()))
