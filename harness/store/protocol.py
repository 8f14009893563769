"""How latency is measured: the `[protocol]` table of a suite file, carried by every cell
task to the worker (harness.cell.timing) and recorded in the manifest."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.errors import UsageError


@dataclass(frozen=True)
class Protocol:
    """How latency is measured (docs/design.md, measurement protocol); recorded in the manifest."""

    warmup_min_iters: int = 3
    warmup_max_s: float = 2.0
    warmup_tolerance: float = 0.1
    min_iters: int = 20
    min_time_s: float = 0.3
    max_iters: int = 2000
    max_time_s: float = 5.0

    @classmethod
    def from_table(cls, table: dict[str, Any], source: str) -> Protocol:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise UsageError(
                f"{source}: unknown [protocol] key {unknown[0]!r} (known: {', '.join(sorted(known))})"
            )
        for key, value in table.items():
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise UsageError(f"{source}: [protocol] {key} must be a non-negative number")
        return cls(**table)
