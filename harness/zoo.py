"""Zoo entries: `ModelSpec`, the contract zoo files and plugins import.

A zoo entry is one small Python file that defines `SPEC` or `SPECS` (contract, DESIGN.md):

    from harness.zoo import Expect, ModelSpec

Finding and loading entries is the planning stage's job (harness.plan.discovery).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.plan import expect as expectations
from harness.plan.expect import Expect
from harness.store.records import Record

__all__ = ["Expect", "ModelSpec"]

_NAME = re.compile(r"^[a-z0-9_.\-]+$")


@dataclass(frozen=True)
class ModelSpec:
    """A model the harness can run (contract: external zoo plugins use it)."""

    name: str
    family: str
    build: Callable[[], Any]
    example_inputs: Callable[[], tuple[Any, ...]]
    example_kwargs: Callable[[], dict[str, Any]] | None = None
    # torch.export-style spec ({axis: "name"} per input, aligned with the inputs); the
    # harness derives TorchScript dynamic_axes from it.
    dynamic_shapes: Any = None
    # Sizes the named dynamic dimensions take at the second verification shape
    # (default: dimensions on axis 0 become 1, the others half their example size).
    dynamic_sizes: dict[str, int] | None = None
    tolerance: tuple[float, float] | None = None
    tags: tuple[str, ...] = ()
    # Expected outcomes (harness.plan.expect.Expect; the older `(pattern, reason)` tuples
    # still work and mean any failure).
    expect: tuple[Any, ...] = ()
    description: str = ""
    # Modules the entry needs beyond torch (e.g. "transformers", "torchvision"): where one
    # does not import, the model's cells are recorded as skipped with that reason.
    requires: tuple[str, ...] = ()
    # Export peak memory allowed, as a multiple of the model's weights (None: unchecked).
    max_export_memory_ratio: float | None = None
    # Why the model cannot run, known without running it (a generated entry whose
    # architecture does not build, from a committed inventory): its cells are skipped with
    # this reason.
    skip_reason: str | None = None
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"model name {self.name!r} must match [a-z0-9_.-]+")
        object.__setattr__(
            self, "expect", expectations.for_model(expectations.normalize(self.expect), self.name)
        )
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "requires", tuple(self.requires))

    def missing_requirement(self) -> str | None:
        """Why this model cannot run here, or None: the first of `requires` not importable,
        else the entry's own `skip_reason`."""
        for module in self.requires:
            try:
                importlib.import_module(module)
            except Exception as exc:  # ImportError, or a broken install raising anything
                return f"{module} is not available here ({type(exc).__name__}: {exc})"
        return self.skip_reason

    def judge(self, record: Record) -> Record:
        """Apply this entry's expectations to one of its records (harness.plan.expect.judge)."""
        return expectations.judge(record, self.expect)
