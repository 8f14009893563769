"""A few OpInfo entries (family `opinfo`, at float32) whose exporter an environment variable
breaks, to inject a coverage regression in end-to-end tests: HARNESS_INJECT_WRONG_OP=neg
replaces onnxscript's translation of aten::neg with one that returns its input unchanged
(wrong numbers, through the dynamo exporter only), in the worker, before the cell's first
export. Everything else (the other ops, the TorchScript exporter) is untouched."""

from __future__ import annotations

import dataclasses
import functools
import os

from harness.zoo import ModelSpec, SampleSet
from harness.zoo.generated.opinfo_specs import BUILTIN_OPINFO_INVENTORY, specs

OPS = ("abs", "neg", "sigmoid", "add")
ENV = "HARNESS_INJECT_WRONG_OP"


def inject_wrong_translation(op: str) -> None:
    """Make onnxscript translate aten::<op> as Identity (once per process)."""
    from onnxscript import opset18
    from onnxscript.function_libs.torch_lib.registration import Registry, default_registry, torch_op
    from onnxscript.function_libs.torch_lib.tensor_typing import TReal

    entry = default_registry[f"aten::{op}"]
    if getattr(entry, "harness_injected", False):
        return

    def wrong(self):  # type: ignore[no-untyped-def]
        return opset18.Identity(self)

    # onnxscript reads the signature from the annotations (real objects, not strings)
    wrong.__annotations__ = {"self": TReal, "return": TReal}
    translated = torch_op(f"aten::{op}", registry=Registry(), trace_only=True)(wrong)
    entry.overloads[:] = [translated]
    entry.harness_injected = True


def _samples(original: functools.partial) -> SampleSet:
    if os.environ.get(ENV):
        inject_wrong_translation(os.environ[ENV])
    return original()


def _renamed(spec: ModelSpec) -> ModelSpec:
    # The built-in zoo has these names; the fixture's models are its own.
    samples = functools.partial(_samples, spec.samples)
    return dataclasses.replace(spec, name="fixture." + spec.name, samples=samples)


SPECS = [
    _renamed(s)
    for s in specs(BUILTIN_OPINFO_INVENTORY)
    if s.metadata["opinfo"] in OPS
    and s.metadata["dtype"] == "float32"
    and not s.metadata["variant"]
]
