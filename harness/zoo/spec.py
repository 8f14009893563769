"""Zoo entries: `ModelSpec`, the contract zoo files and plugins import (through `harness.zoo`).

A zoo entry is one small Python file that defines `SPEC` or `SPECS` (contract, docs/design.md):

    from harness.zoo import Expect, ModelSpec

Finding and loading entries is harness.zoo.discovery's job.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.store.records import Record
from harness.zoo import expect as expectations

# The seed every model, input and sample is built under, harness-wide: a cell, its
# reference, its repro and a plain script build the same weights from it.
SEED = 0

if TYPE_CHECKING:  # the contract loads without torch
    import torch

# torch.export's dynamic_shapes: per input (a tuple or list in order, or a dict keyed by
# parameter name) its {axis: name}, or a nested spec of the input's structure.
DynamicShapes = dict[str, object] | tuple[object, ...] | list[object]

_NAME = re.compile(r"[a-z0-9_.\-]+")  # fullmatch: `$` also matches before a final newline


@dataclass(frozen=True)
class Sample:
    """One sample of a sampled zoo entry (`ModelSpec.samples`): a small model of its own
    with its inputs (each sample has its own shapes and arguments), or why it cannot run."""

    index: int  # its position among the source's samples
    build: Callable[[], torch.nn.Module] | None = None  # a module taking `inputs`
    inputs: tuple[object, ...] = ()
    tolerance: tuple[float, float] | None = None  # (rtol, atol) for float outputs
    tolerance_source: str | None = None  # where `tolerance` comes from, for its records
    # False where the outputs are uninitialised memory: only shapes and dtypes are compared.
    compare_values: bool = True
    description: str = ""  # what the sample is, for listings of failures
    skip: str | None = None  # why it cannot run (the sample is recorded as skipped)


@dataclass(frozen=True)
class SampleSet:
    """The samples a sampled cell runs: at most a cap of the `total` its source has."""

    samples: tuple[Sample, ...]
    total: int


@dataclass(frozen=True)
class ModelSpec:
    """A model the harness can run (contract: external zoo plugins use it)."""

    name: str
    family: str
    build: Callable[[], torch.nn.Module]
    example_inputs: Callable[[], tuple[object, ...]]
    example_kwargs: Callable[[], dict[str, object]] | None = None
    # torch.export-style spec ({axis: "name"} per input, aligned with the inputs); the
    # harness derives TorchScript dynamic_axes from it.
    dynamic_shapes: DynamicShapes | None = None
    # Sizes the named dynamic dimensions take at the second verification shape
    # (default: dimensions on axis 0 become 1, the others half their example size); a
    # tuple of such dicts verifies a dynamic cell at each of them.
    dynamic_sizes: dict[str, int] | tuple[dict[str, int], ...] | None = None
    # Named shapes ({name: sizes of the named dynamic dimensions}) a dynamic cell is timed
    # at instead of the example shape, e.g. a decode step and a prefill; the first gives
    # the record's ort/eager latency, each is kept in `shape_latency`.
    latency_shapes: Mapping[str, dict[str, int]] | None = None
    # The inputs at given sizes of the named dynamic dimensions, from the built model:
    # (model, {name: size}) -> positional inputs (called under the seed). The shapes a
    # dynamic cell is verified and timed at come from here where slicing the example
    # would not give valid inputs (a KV cache holds its length beside its tensors).
    inputs_at: Callable[[torch.nn.Module, Mapping[str, int]], tuple[object, ...]] | None = None
    # The ONNX graph's input names, one per tensor of the inputs in flattening order, and
    # its output names (default input_0.., output_0..).
    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    tolerance: tuple[float, float] | None = None
    tags: tuple[str, ...] = ()
    # Expected outcomes (harness.zoo.expect.Expect; the older `(pattern, reason)` tuples
    # still work and mean any failure).
    expect: tuple[expectations.Expect | tuple[str, str], ...] = ()
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
    # A sampled entry (one OpInfo at one dtype): () -> SampleSet. Each sample is exported,
    # checked, run and compared on its own, and the cell's record summarises them
    # (harness.runtime.samples); `build`/`example_inputs` then give its first sample alone.
    samples: Callable[[], SampleSet] | None = None
    # Facts about the entry for `harness list --json`, selection (`--models KEY:GLOB`) and
    # its records (e.g. {"opinfo": "nn.functional.conv2d", "dtype": "float32"}).
    metadata: Mapping[str, object] = field(default_factory=dict)
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"model name {self.name!r} must match [a-z0-9_.-]+")
        object.__setattr__(
            self, "expect", expectations.for_model(expectations.normalize(self.expect), self.name)
        )
        object.__setattr__(self, "tags", tuple(self.tags))
        object.__setattr__(self, "requires", tuple(self.requires))
        object.__setattr__(self, "metadata", dict(self.metadata))

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
        """Apply this entry's expectations to one of its records (harness.zoo.expect.judge)."""
        return expectations.judge(record, expectations.normalize(self.expect))
