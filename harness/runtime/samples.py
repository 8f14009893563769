"""Sampled cells: a zoo entry with `samples` (one OpInfo at one dtype) is many small
models, one per sample, each with its own shapes and arguments. Each sample goes through
the stages a whole-model cell runs (harness.runtime.pipeline): exported by the cell's exporter
with a real call and the cell's patch in place, checked, loaded in ONNX Runtime on the
cell's device and run, and its outputs compared with eager's, failing with the same texts
and signatures. The cell's record summarises them (`samples`) and takes its status, stage
and error from its worst sample. A cell is ok when every sample that could run matches.

A sample is skipped, with the reason, where eager gives no tensor, where two eager calls
on the same inputs differ (a random op: nothing to compare with), where eager on the
sample's own inputs and on copies of them differ (the op reads what a view leaves out:
storage beyond it, strides, aliasing; a graph input carries only values), or where eager
itself fails on it. Each compared sample records the tolerance that judged it and where it
comes from. Latency is not timed: these cells measure coverage, not speed.
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness import exporters
from harness.cell.numerics import DEFAULT_TOLERANCE
from harness.cell.precision import TORCH_DTYPE
from harness.cell.reference import Reference
from harness.cell.shapes import Inputs, flatten_outputs, to_float64
from harness.cell.stages import StageFailure, stage
from harness.exporters.request import ExportRequest
from harness.runtime import mismatch, pipeline
from harness.runtime.warmup import measure_cold_start, warm_up_exporter
from harness.store.details import SampleFailure, SampleSkip, SampleSummary, SampleTolerance
from harness.store.error_text import first_line
from harness.store.measures import ExportMeasures
from harness.store.records import CellTask, Dtype, Measurements, OutputCheck, Record
from harness.store.status import Stage, Status
from harness.zoo import ModelSpec, Sample, SampleSet
from harness.zoo.spec import SEED

MAX_LISTED = 20  # failing and skipped samples listed one by one in the record
VIEW_DEPENDENT = (
    "eager on the sample's own inputs and on copies of them differ: the op reads what the"
    " inputs' views leave out (storage, strides, aliasing), which a graph input cannot carry"
)


class SkipSample(Exception):
    """A sample that cannot be judged; the message is the reason."""


_Number = TypeVar("_Number", int, float)


class _Tolerance(TypedDict):
    rtol: float
    atol: float
    source: str


@dataclass
class Outcome:
    """One sample's result: its status (ok, skipped, or a failure at a stage)."""

    sample: Sample
    status: Status
    stage: Stage | None = None
    error: BaseException | None = None
    reason: str | None = None  # why it was skipped
    measured: Measurements = field(default_factory=Measurements)

    @property
    def tolerance(self) -> _Tolerance | None:
        """The tolerance that judged the sample's outputs (where they were compared), and
        where it comes from: the OpInfo's own, or the harness's default."""
        if self.measured.numerics.checks is None:
            return None
        rtol, atol = self.sample.tolerance or DEFAULT_TOLERANCE
        source = self.sample.tolerance_source or "the harness's default"
        return {"rtol": rtol, "atol": atol, "source": source}

    @property
    def ran(self) -> bool:
        return self.status is not Status.SKIPPED


def run_sampled(task: CellTask, spec: ModelSpec, m: Measurements) -> Record:
    """Every sample of the cell, then one record summarising them."""
    assert spec.samples is not None
    torch.set_num_threads(task.threads)
    measure_cold_start(task.cell.exporter)
    warm_up_exporter(task.cell.exporter, task.cell.opset)
    try:
        sample_set = spec.samples()
    except Exception as exc:  # the source cannot build its samples: say so, never drop
        reason = f"samples cannot be built: {first_line(exc)}"
        return Record.without_run(task.cell, task.run_id, status=Status.SKIPPED, reason=reason)
    workdir = Path(tempfile.mkdtemp(prefix="harness-samples-"))
    try:
        outcomes = [_run_one(task, s, workdir / f"sample_{s.index}", m) for s in sample_set.samples]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _record(task, sample_set, outcomes, m)


def _run_one(task: CellTask, sample: Sample, workdir: Path, cell: Measurements) -> Outcome:
    if sample.skip is not None or sample.build is None:
        return Outcome(sample, Status.SKIPPED, reason=sample.skip or "no model to build")
    outcome = Outcome(sample, Status.OK)
    try:
        _stages(
            task, sample, workdir, outcome.measured, locate=cell.numerics.first_divergence is None
        )
    except SkipSample as skip:
        return Outcome(sample, Status.SKIPPED, reason=str(skip))
    except StageFailure as failure:
        outcome.status, outcome.stage = pipeline.failure_status(failure), failure.stage
        outcome.error = failure.error
    except Exception as exc:  # a harness bug on one sample must not lose the others
        outcome.status, outcome.error = Status.HARNESS_ERROR, exc
    found = outcome.measured.numerics
    if found.first_divergence is not None:
        cell.numerics = replace(
            cell.numerics,
            first_divergence=replace(found.first_divergence, sample=sample.index),
            mismatch_stage=found.mismatch_stage,
        )
    return outcome


def _stages(
    task: CellTask, sample: Sample, workdir: Path, m: Measurements, *, locate: bool
) -> None:
    """build -> reference -> export -> check -> ORT session -> run -> numerics."""
    assert sample.build is not None
    with stage("build"):
        torch.manual_seed(SEED)
        model = sample.build().eval()
    inputs = Inputs(tuple(sample.inputs), {}, ())
    outputs, outputs64 = _reference(model, inputs, sample)
    workdir.mkdir(parents=True)
    request = ExportRequest(
        model=model,
        inputs=_cloned(inputs),
        opset=task.cell.opset,
        path=workdir / "model.onnx",
        output_names=tuple(f"output_{i}" for i in range(len(outputs))),
    )
    exported = pipeline.export(task, request, m, peaks=False)
    pipeline.check(request.path, m)
    runner = pipeline.session(task, request, m, dtype=_reduced_dtype(inputs))
    got = pipeline.run(runner, inputs)
    checks = _compare(sample, got, outputs, outputs64, runner.output_names)
    m.numerics = replace(m.numerics, checks=checks)
    if locate and not all(c.ok for c in checks):
        tolerance = sample.tolerance or DEFAULT_TOLERANCE
        reference = Reference(inputs, outputs, outputs64)
        exporter = exporters.get(task.cell.exporter)
        mismatch.diagnose(exporter, request, exported, reference, tolerance, m)
    pipeline.require_ok("numerics", checks)


def _reduced_dtype(inputs: Inputs) -> str | None:
    """float16 or bfloat16 where a sample's floating inputs are: ORT's missing kernels for
    them are the runtime's gap (`runtime_missing`), as in a whole model's reduced cell."""
    found = {t.dtype for t in inputs.leaves()}
    reduced = (Dtype.BFLOAT16, Dtype.FLOAT16)
    return next((d.value for d in reduced if TORCH_DTYPE[d] in found), None)


def _reference(
    model: torch.nn.Module, inputs: Inputs, sample: Sample
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    """Eager's outputs (complex ones as real views, as the exporter writes them) and, for
    float inputs, float64's; SkipSample where there is nothing to compare with."""
    seeded = _SeededOps()
    try:
        with seeded:
            first = _eager(model, inputs, SEED)
        second = _eager(model, inputs, SEED + 1) if sample.compare_values else first
    except Exception as exc:
        raise SkipSample(f"eager fails on this sample: {first_line(exc)}") from exc
    if not first:
        raise SkipSample("the op returns no tensor")
    if seeded.found and sample.compare_values:
        # Seeded inside the op (OpInfo's wrapper_set_seed) eager repeats itself; ONNX
        # Runtime draws its own numbers.
        raise SkipSample(
            f"random: calls {', '.join(sorted(seeded.found))} (nondeterministic_seeded)"
        )
    if any(t.dtype == torch.bfloat16 for t in first):
        raise SkipSample("returns bfloat16, which ONNX Runtime's Python API cannot return")
    if not _same(first, second):
        raise SkipSample("random: two eager calls with the same inputs differ")
    strided = sample.compare_values and _strided(inputs)
    if strided and not _same(first, _eager(model, inputs, SEED, copied=_as_given)):
        raise SkipSample(VIEW_DEPENDENT)
    outputs = [_as_numpy(t) for t in first]
    return outputs, _reference64(model, inputs) if sample.compare_values else None


# torch declares TorchDispatchMode's __init__ and __init_subclass__ without types.
class _SeededOps(TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Notes the ATen ops torch tags `nondeterministic_seeded` (random) that a call runs."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.found: set[str] = set()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.found.add(str(func))
        return func(*args, **(kwargs or {}))


def _eager(
    model: torch.nn.Module,
    inputs: Inputs,
    seed: int,
    *,
    copied: Callable[[Inputs], Inputs] | None = None,
) -> list[torch.Tensor]:
    """Eager's outputs on copies of the inputs: by default fresh tensors of their values
    (what the ONNX graph's inputs are), or `copied(inputs)`."""
    torch.manual_seed(seed)
    with torch.no_grad():
        outputs = flatten_outputs((copied or _cloned)(inputs).call(model))
    # Sparse OpInfos' outputs are compared as the dense values an ONNX graph gives.
    return [(t.to_dense() if t.layout != torch.strided else t).detach().clone() for t in outputs]


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    def comparable(t: torch.Tensor) -> torch.Tensor:
        t = torch.view_as_real(t) if t.is_complex() else t
        return torch.nan_to_num(t, nan=0.0) if t.is_floating_point() else t

    return len(a) == len(b) and all(
        x.shape == y.shape and x.dtype == y.dtype and torch.equal(comparable(x), comparable(y))
        for x, y in zip(a, b, strict=True)
    )


def _reference64(model: torch.nn.Module, inputs: Inputs) -> list[np.ndarray] | None:
    """Eager on float64 inputs (eager's own noise floor), where there are float inputs and
    the op takes them."""
    if not any(t.is_floating_point() for t in inputs.leaves()):
        return None
    try:
        with torch.no_grad():
            out = flatten_outputs(to_float64(_cloned(inputs)).call(model))
        return [_as_numpy(t) for t in out]
    except Exception:
        return None


def _cloned(inputs: Inputs) -> Inputs:
    """A copy per use: an op that writes into its inputs must not change the next use's."""
    return inputs.map_tensors(lambda t: t.clone())


def _strided(inputs: Inputs) -> bool:
    """Whether views can matter: a sparse tensor has no storage to view (and no deepcopy
    that keeps one)."""
    return all(t.layout == torch.strided for t in inputs.leaves())


def _as_given(inputs: Inputs) -> Inputs:
    """A copy that keeps what views are: each storage whole, offsets, strides, and tensors
    that share a storage sharing the copy of it (torch's deepcopy of tensors)."""
    return copy.deepcopy(inputs)


# dtypes numpy has no type for: eager's compared in the nearest one it has.
_WIDENED = {torch.bfloat16: torch.float32, torch.complex32: torch.complex64}


def _as_numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    return pipeline.real_view(t.to(_WIDENED.get(t.dtype, t.dtype)).numpy())


def _compare(
    sample: Sample,
    got: list[np.ndarray],
    want: list[np.ndarray],
    want64: list[np.ndarray] | None,
    names: list[str],
) -> list[OutputCheck]:
    named = [f"sample{sample.index}.{n}" for n in names]
    if sample.compare_values:
        return pipeline.compare(got, want, want64, named, sample.tolerance)
    rtol, atol = sample.tolerance or DEFAULT_TOLERANCE
    note = "values not compared (uninitialised memory): shape and dtype only"
    if len(got) != len(want):
        return [
            OutputCheck("outputs", None, None, None, rtol, atol, False, note="output count differs")
        ]
    return [
        OutputCheck(
            n, None, None, None, rtol, atol, g.shape == w.shape and g.dtype == w.dtype, note
        )
        for n, g, w in zip(named, got, want, strict=True)
    ]


# -- the cell's record --------------------------------------------------------------------------


def _record(
    task: CellTask, sample_set: SampleSet, outcomes: list[Outcome], m: Measurements
) -> Record:
    _merge(outcomes, m)
    m.samples = summary(sample_set, outcomes)
    ran = [o for o in outcomes if o.ran]
    if not ran:
        reasons = Counter(o.reason or "" for o in outcomes)
        why = "; ".join(f"{r} ({n})" for r, n in reasons.most_common(3)) or "no samples"
        record = Record.without_run(
            task.cell, task.run_id, status=Status.SKIPPED, reason=f"no sample could run: {why}"
        )
        return record.with_changes(samples=m.samples)
    worst = max(ran, key=lambda o: o.status.rank)  # the first of the worst
    if worst.status is Status.OK:
        return Record.finished(task.cell, task.run_id, m)
    if worst.error is not None and worst.stage is not None:
        return pipeline.failed(task, m, StageFailure(worst.stage, worst.error))
    return Record.finished(task.cell, task.run_id, m, status=worst.status, error=worst.error)


def _merge(outcomes: list[Outcome], m: Measurements) -> None:
    """The cell's measurements: sums over its samples (export time, phases, nodes, bytes,
    op counts), the union of unsupported ops, every sample's numerics."""
    done = [o.measured.export for o in outcomes if o.ran]
    phases = {p for s in done for p in (s.phases or {})}
    unsupported = [op for s in done for op in s.unsupported_ops or ()]
    known = any(s.unsupported_ops is not None for s in done)
    m.export = ExportMeasures(
        seconds=_sum(s.seconds for s in done),
        phases={p: _sum((s.phases or {}).get(p) for s in done) for p in sorted(phases)} or None,
        opset_actual=next((s.opset_actual for s in done if s.opset_actual is not None), None),
        onnx_nodes=_sum(s.onnx_nodes for s in done),
        onnx_bytes=_sum(s.onnx_bytes for s in done),
        onnx_ops=_counts(s.onnx_ops for s in done),
        aten_ops=_counts(s.aten_ops for s in done),
        unsupported_ops=sorted(set(unsupported)) if known else None,
    )
    checks = [c for o in outcomes if o.ran for c in o.measured.numerics.checks or ()]
    m.numerics = replace(m.numerics, checks=checks or None)


def _sum(values: Iterable[_Number | None]) -> _Number | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _counts(dicts: Iterable[dict[str, int] | None]) -> dict[str, int] | None:
    total: Counter[str] = Counter()
    seen = False
    for d in dicts:
        if d is not None:
            seen = True
            total.update(d)
    return dict(sorted(total.items())) if seen else None


def summary(sample_set: SampleSet, outcomes: list[Outcome]) -> SampleSummary:
    """The record's `samples`: counts, then each failing and skipped sample."""
    ran = [o for o in outcomes if o.ran]
    failing = [o for o in ran if o.status is not Status.OK]
    skipped = [o for o in outcomes if not o.ran]
    exported = [o for o in ran if o.status is Status.OK or _after_export(o.stage)]
    return SampleSummary(
        total=sample_set.total,
        run=len(outcomes),
        exported=len(exported),
        matched=len(ran) - len(failing),
        wrong=sum(1 for o in failing if o.status.wrong_numbers),
        failed=sum(1 for o in failing if not o.status.wrong_numbers),
        skipped=len(skipped),
        view_dependent=sum(1 for o in skipped if o.reason == VIEW_DEPENDENT),
        indices=tuple(o.sample.index for o in outcomes),
        failures=tuple(_failure(o) for o in failing[:MAX_LISTED]),
        skips=tuple(SampleSkip(o.sample.index, o.reason) for o in skipped[:MAX_LISTED]),
        tolerances=tolerances(outcomes),
    )


def tolerances(outcomes: list[Outcome]) -> tuple[SampleTolerance, ...]:
    """Which tolerance judged each compared sample, passing or failing: one entry per
    tolerance and source, with the indices of the samples it judged."""
    judged: dict[tuple[float, float, str], list[int]] = {}
    for o in outcomes:
        if (tol := o.tolerance) is not None:
            judged.setdefault((tol["rtol"], tol["atol"], tol["source"]), []).append(o.sample.index)
    return tuple(
        SampleTolerance(rtol, atol, source, tuple(indices))
        for (rtol, atol, source), indices in judged.items()
    )


def _after_export(where: Stage | None) -> bool:
    return where is not None and not where.is_export and where not in (Stage.BUILD, Stage.REFERENCE)


def _failure(o: Outcome) -> SampleFailure:
    return SampleFailure(
        index=o.sample.index,
        status=str(o.status),
        stage=None if o.stage is None else str(o.stage),
        error_signature=None if o.error is None else pipeline.failure_signature(o.error),
        unsupported_ops=tuple(o.measured.export.unsupported_ops or ()) or None,
        inputs=o.sample.description or None,
        tolerance=None if o.tolerance is None else dict(o.tolerance),
    )
