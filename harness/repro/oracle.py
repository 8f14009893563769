"""Does a candidate still fail the way the cell failed? The real steps, in this process.

An export, checker or ONNX Runtime failure reproduces where the candidate, exported by the
cell's exporter with the real call and then checked, loaded and run as the cell was, fails
at the same stage with the same error signature. A numerics mismatch reproduces where the
candidate's last output (the cell's first divergent node) is still outside the cell's
tolerance in ONNX Runtime, judged by the cell's rule against the candidate run in torch
(float32, and float64 for eager's noise floor where it runs).
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from harness import exporters
from harness.cell.numerics import check_output
from harness.cell.ort import OrtRunner
from harness.cell.shapes import Inputs, flatten_outputs, to_float64
from harness.cell.stages import StageFailure, stage
from harness.exporters.request import ExportRequest
from harness.repro.program import Candidate
from harness.repro.select import AFTER_EXPORT
from harness.store.error_text import signature_of
from harness.store.records import OutputCheck
from harness.store.status import Stage
from harness.zoo.spec import DynamicShapes


@dataclass(frozen=True)
class Target:
    """The failure to keep: the stage and error signature, or for numerics the node whose
    value must stay wrong (`node`) under the cell's tolerance."""

    exporter: str
    opset: int
    stage: Stage
    signature: str | None = None
    node: str | None = None
    tolerance: tuple[float, float] = (1e-4, 1e-5)

    @property
    def numerics(self) -> bool:
        return self.stage is Stage.NUMERICS


@dataclass(frozen=True)
class Verdict:
    """What the candidate did: the stage and signature where it failed, or the check of
    the divergent node's value."""

    stage: Stage | None
    signature: str | None = None
    check: OutputCheck | None = None

    def matches(self, target: Target) -> bool:
        if target.numerics:
            return self.stage is Stage.NUMERICS and self.check is not None and not self.check.ok
        return self.stage is target.stage and self.signature == target.signature


def reproduces(candidate: Candidate, target: Target, workdir: Path) -> bool:
    return judge(candidate, target, workdir).matches(target)


def through_stages(
    model: Any,
    inputs: Inputs,
    target: Target,
    workdir: Path,
    dynamic_shapes: DynamicShapes | None = None,
) -> list[Any]:
    """Export `model` with the cell's exporter (into a fresh `workdir`; dynamic along
    `dynamic_shapes`) and take it through the cell's stages up to the target's: ONNX
    Runtime's outputs where it ran, else []. Raises the stage's StageFailure."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    request = ExportRequest(model, inputs, target.opset, workdir / "model.onnx", dynamic_shapes)
    exporters.get(target.exporter).export(request)
    if target.stage in AFTER_EXPORT:
        with stage("check"):
            onnx.checker.check_model(str(request.path), full_check=True)
    if target.stage not in AFTER_EXPORT[1:]:
        return []
    runner = OrtRunner(request.path, 1, "cpu")
    if target.stage not in AFTER_EXPORT[2:]:
        return []
    with stage("ort_run"):
        return list(runner.run(inputs))


def judge(candidate: Candidate, target: Target, workdir: Path) -> Verdict:
    """Export the candidate and take it through the cell's stages up to the target's."""
    inputs = Inputs(candidate.inputs, {}, candidate.input_names)
    try:
        got = through_stages(candidate.module, inputs, target, workdir)
    except StageFailure as failure:
        return Verdict(failure.stage, signature_of(failure.error))
    if not target.numerics:
        return Verdict(None)
    if not got:
        return Verdict(Stage.NUMERICS)
    return Verdict(Stage.NUMERICS, check=node_check(candidate, np.asarray(got[-1]), target))


def node_check(candidate: Candidate, got: np.ndarray, target: Target) -> OutputCheck:
    """The divergent node's ONNX value against the candidate run in torch, by the rule."""
    want, want64 = torch_values(candidate)
    name = candidate.outputs[-1] if candidate.outputs else "output"
    return check_output(
        name, got, want[-1], None if want64 is None else want64[-1], *target.tolerance
    )


def torch_values(candidate: Candidate) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """The candidate's outputs in torch, float32 and (where it runs in it) float64."""
    with torch.no_grad():
        outputs = [t.detach().numpy() for t in flatten_outputs(candidate.module(*candidate.inputs))]
        try:
            module64 = copy.deepcopy(candidate.module).double()
            inputs64 = to_float64(Inputs(candidate.inputs, {}, ())).args
            outputs64 = [t.detach().numpy() for t in flatten_outputs(module64(*inputs64))]
        except Exception:  # an op without a float64 kernel: no noise floor, plain allclose
            outputs64 = None
    return outputs, outputs64
