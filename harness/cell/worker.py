"""One cell, start to finish, in the process that runs it: a child of the worker's zygote
(harness.cell.isolation), which exits with whatever the cell did to it; or a test.

build -> reference -> export -> check -> ORT session -> run -> numerics -> dynamic
-> latency -> record. Each stage is timed and fails into a status (`StageFailure`),
never into an exception that escapes `run_cell`.
"""

from __future__ import annotations

import gc
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from harness.cell import exporters, failures, limits, mismatch, patches
from harness.cell.artifacts import artifacts_dir, keep_onnx, write_failure_artifacts
from harness.cell.dynamic import fixed_dims, latency_shapes, specialised_error, verification_shapes
from harness.cell.exporters.request import Exported, ExportRequest, Unavailable
from harness.cell.graph import check
from harness.cell.graph_store import keep_graph
from harness.cell.numerics import DEFAULT_TOLERANCE, compare_outputs
from harness.cell.ort import CudaProviderMissing, OrtRunner, cuda_provider_missing
from harness.cell.reference import Reference, build, reference
from harness.cell.samples import run_sampled
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure, stage
from harness.cell.timing import PeakCuda, PeakRss, freeze_survivors, time_interleaved
from harness.cell.warmup import measure_cold_start, take_cold_start, warm_up_exporter
from harness.store.details import OrtRuntime, WorkerInfo
from harness.store.protocol import Protocol
from harness.store.records import CellTask, Measurements, Record, ShapeLatency
from harness.store.status import Status
from harness.zoo import ModelSpec
from harness.zoo.discovery import load_source

SEED = 0


class NumericsMismatch(Exception):
    pass


def run_cell(task: CellTask) -> Record:
    """Run one cell and return its record; every failure is a status, never a raise."""
    start = time.perf_counter()
    measured = Measurements()
    freeze_survivors()
    try:
        spec = find_spec(task.source, task.cell.model)
        with (
            limits.memory_limit(task.max_memory_gb),
            limits.crash_log(limits.crash_log_path(task.run_dir, task.cell.cell_id)),
        ):
            run = run_sampled if spec.samples is not None else _run  # one OpInfo at a dtype
            record = _skip_reason(task, spec) or run(task, spec, measured)
    except StageFailure as failure:
        record = _failed(task, measured, failure)
    except Exception as exc:  # a bug in the harness itself must still end as a record
        record = Record.finished(
            task.cell, task.run_id, measured, status=Status.HARNESS_ERROR, error=exc
        )
    cold = take_cold_start(task.cell.exporter)
    return record.with_changes(
        duration_s=time.perf_counter() - start,
        attempt=task.attempt,
        worker=WorkerInfo.from_dict({"cold_start": cold}) if cold else None,
    )


def find_spec(source: str, model: str) -> ModelSpec:
    for spec in load_source(source):
        if spec.name == model:
            return spec
    raise LookupError(f"model {model!r} not found in {source}")


def _skip_reason(task: CellTask, spec: ModelSpec) -> Record | None:
    reason = (
        spec.missing_requirement()
        or exporters.get(task.cell.exporter).unavailable()
        or patches.get(task.cell.patch).unavailable()
        or patches.get(task.cell.patch).pointless(spec.metadata)
    )
    if reason is None and task.cell.device == "cuda" and not torch.cuda.is_available():
        reason = "no CUDA device on this worker"
    if reason is None:
        return None
    return Record.without_run(task.cell, task.run_id, status=Status.SKIPPED, reason=reason)


# -- the stages -------------------------------------------------------------------------------


def _run(task: CellTask, spec: ModelSpec, m: Measurements) -> Record:
    torch.set_num_threads(task.threads)
    device = task.cell.device
    if device == "cuda" and (why := cuda_provider_missing()):
        # Known before the export: a CUDA cell that ORT would run on the CPU fails here,
        # never as a quiet skip or a CPU run (OrtRunner also checks each session).
        raise StageFailure("ort_session", CudaProviderMissing(why))
    measure_cold_start(task.cell.exporter)
    warm_up_exporter(task.cell.exporter, task.cell.opset)
    model, inputs = build(spec, device)
    ref = reference(model, inputs)
    workdir = Path(tempfile.mkdtemp(prefix="harness-cell-"))
    try:
        request = _request(task, spec, model, inputs, len(ref.outputs), workdir)
        try:
            exported = _export(task, request, m, spec.max_export_memory_ratio)
            check(request.path, m)
            runner = OrtRunner(request.path, task.threads, device, tf32=False)
            m.ort = replace(m.ort, session_s=runner.session_s)
            _verify(runner, ref, spec, m, lambda: _diagnose(task, request, exported, spec, ref, m))
            if task.cell.dynamic:
                _verify_dynamic(runner, model, inputs, spec, m)
            shapes = _timed_shapes(task, spec, model, inputs)
            _latency(runner, model, shapes, task.protocol or Protocol(), m)
        finally:  # a model that exported and then failed is the one a user keeps to debug
            if m.export.seconds is not None:
                keep_onnx(task, request.path, m)
        keep_graph(task, request.path, runner.feeds(inputs), m)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return Record.finished(task.cell, task.run_id, m)


def _request(
    task: CellTask,
    spec: ModelSpec,
    model: torch.nn.Module,
    inputs: Inputs,
    n_outputs: int,
    workdir: Path,
) -> ExportRequest:
    return ExportRequest(
        model=model,
        inputs=inputs,
        opset=task.cell.opset,
        path=workdir / "model.onnx",
        dynamic_shapes=spec.dynamic_shapes if task.cell.dynamic else None,
        output_names=_output_names(spec, n_outputs),
        artifacts=artifacts_dir(task),
    )


def _output_names(spec: ModelSpec, n_outputs: int) -> tuple[str, ...]:
    """The entry's output names (logits, present.0.key, ...), else output_0, output_1, ..."""
    if spec.output_names is None:
        return tuple(f"output_{i}" for i in range(n_outputs))
    if len(spec.output_names) != n_outputs:
        raise StageFailure(
            "build",
            ValueError(
                f"the entry names {len(spec.output_names)} outputs but the model returns {n_outputs}"
            ),
        )
    return tuple(spec.output_names)


def _export(
    task: CellTask, request: ExportRequest, m: Measurements, memory_ratio: float | None
) -> Exported:
    """The export call, with the cell's patch in place around it (none: the plain call)."""
    with patches.get(task.cell.patch).applied():
        return _export_call(task, request, m, memory_ratio)


def _export_call(
    task: CellTask, request: ExportRequest, m: Measurements, memory_ratio: float | None
) -> Exported:
    exporter = exporters.get(task.cell.exporter)
    try:
        with PeakRss() as peak, PeakCuda(task.cell.device) as peak_cuda:
            exported = exporter.export(request)
    except Unavailable as exc:  # pragma: no cover - only where dynamo_export vanished mid-run
        raise StageFailure("translate", exc) from exc
    except StageFailure as failure:
        facts = exporter.on_failure(request, failure)
        m.export = replace(m.export, aten_ops=facts.aten_ops, unsupported_ops=facts.unsupported_ops)
        raise
    m.export = replace(
        m.export,
        seconds=exported.export_s,
        phases={k: None if v is None else round(v, 6) for k, v in exported.phases.items()},
        peak_rss_mb=peak.peak_mb,
        peak_cuda_mb=peak_cuda.peak_mb,
        aten_ops=exporter.aten_ops(request, exported),
    )
    _check_memory_budget(request.model, peak.peak_mb, memory_ratio)
    return exported


class MemoryBudgetExceeded(Exception):
    pass


def _check_memory_budget(
    model: torch.nn.Module, peak_mb: float | None, ratio: float | None
) -> None:
    """A zoo entry may cap export memory at a multiple of its weights (the large model:
    an exporter holding extra copies of 2 GB of weights is a regression)."""
    if ratio is None or peak_mb is None:
        return
    weights_mb = (
        sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers())) / 1024**2
    )
    if peak_mb > ratio * weights_mb:
        raise StageFailure(
            "save",
            MemoryBudgetExceeded(
                f"export peak {peak_mb:.0f} MiB is over {ratio:g} x the weights ({weights_mb:.0f} MiB)"
            ),
        )


def _verify(
    runner: OrtRunner,
    ref: Reference,
    spec: ModelSpec,
    m: Measurements,
    diagnose: Callable[[], None],
) -> None:
    with stage("ort_run"):
        outputs = runner.run(ref.inputs)
    checks = compare_outputs(
        outputs, ref.outputs, ref.outputs64, runner.output_names, spec.tolerance
    )
    m.numerics = replace(m.numerics, checks=checks)
    if not all(c.ok for c in checks):
        diagnose()
    _require_ok("numerics", checks)


def _diagnose(
    task: CellTask,
    request: ExportRequest,
    exported: Exported,
    spec: ModelSpec,
    ref: Reference,
    m: Measurements,
) -> None:
    """The first divergent node and the stage that changed the numbers."""
    exporter = exporters.get(task.cell.exporter)
    mismatch.diagnose(exporter, request, exported, ref, spec.tolerance or DEFAULT_TOLERANCE, m)


def _require_ok(stage_name: str, checks: list[Any]) -> None:
    bad = [c for c in checks if not c.ok]
    if bad:
        detail = "; ".join(
            f"{c.name}: max_abs {c.max_abs}" + (f" ({c.note})" if c.note else "") for c in bad
        )
        raise StageFailure(
            stage_name, NumericsMismatch(f"{len(bad)} of {len(checks)} outputs differ: {detail}")
        )


def _verify_dynamic(
    runner: OrtRunner, model: torch.nn.Module, inputs: Inputs, spec: ModelSpec, m: Measurements
) -> None:
    """Dynamic cells: every declared-dynamic dimension stays dynamic in the graph (else a
    `dynamic_mismatch` naming it, even where other shapes would run), and the graph gives
    eager's numbers again at each verification shape (default: batch 1, shorter sequences)."""
    fixed = fixed_dims(runner.path, inputs, spec.dynamic_shapes)
    if fixed:
        raise StageFailure("dynamic", specialised_error(fixed))
    checks = []
    for label, other in _shapes(lambda: verification_shapes(spec, model, inputs)):
        with stage("dynamic"):
            ref = reference(model, other)
            outputs = runner.run(other)
        names = [f"{n}@{label}" for n in runner.output_names]
        checks += compare_outputs(outputs, ref.outputs, ref.outputs64, names, spec.tolerance)
    m.numerics = replace(m.numerics, checks=[*(m.numerics.checks or []), *checks])
    _require_ok("dynamic", checks)


def _shapes(make: Callable[[], Any]) -> Any:
    """Inputs at other shapes, made by the entry (a prefill builds a cache): a failure to make
    them is the entry's, at its stage (build), not the exported graph's."""
    with stage("build"):
        return make()


def _timed_shapes(
    task: CellTask, spec: ModelSpec, model: torch.nn.Module, inputs: Inputs
) -> dict[str, tuple[dict[str, int] | None, Inputs]]:
    """Where the cell is timed: the entry's named latency shapes in a dynamic cell (a decode
    step, a prefill), else the example shape."""
    named = _shapes(lambda: latency_shapes(spec, model, inputs)) if task.cell.dynamic else {}
    return {**named} if named else {"example": (None, inputs)}


def _latency(
    runner: OrtRunner,
    model: torch.nn.Module,
    shapes: dict[str, tuple[dict[str, int] | None, Inputs]],
    protocol: Protocol,
    m: Measurements,
) -> None:
    """ORT and eager timed alternately in one loop, so that `speedup` cancels the machine's
    drift, at each shape in turn; the first shape's figures are the record's latencies, and
    named shapes are also kept by name (`shape_latency`). The session used here has ORT's
    intra-op spinning off (its own `ort_runtime`): an idle ORT pool spinning while eager
    runs would share its cores (docs/design.md: latency in a clean state; seen here: a model
    timed 3x slower beside a spinning session). The checked session is dropped first."""
    with stage("latency"):
        path, threads, device = runner.path, runner.threads, runner.device
        del runner.session
        gc.collect()
        timed = OrtRunner(path, threads, device, spinning=False)
        m.ort = replace(m.ort, runtime=OrtRuntime.from_dict(timed.runtime))
        by_shape: dict[str, ShapeLatency] = {}
        for name, (sizes, inputs) in shapes.items():
            call, eager = timed.bind(inputs), _eager_call(model, inputs)
            with torch.inference_mode():
                ort_ms, eager_ms = time_interleaved(call, eager, protocol)
            by_shape[name] = ShapeLatency.of(sizes, ort_ms, eager_ms)
            del call
        first = next(iter(by_shape.values()))
        m.ort = replace(m.ort, latency=first.ort_latency_ms)
        m.eager = replace(m.eager, latency=first.eager_latency_ms)
        m.shape_latency = {k: v for k, v in by_shape.items() if v.sizes is not None} or None
        del timed


def _eager_call(model: torch.nn.Module, inputs: Inputs) -> Any:
    if not next(iter(inputs.leaves()), torch.empty(0)).is_cuda:
        return lambda: inputs.call(model)

    def call_and_wait() -> Any:
        out = inputs.call(model)
        torch.cuda.synchronize()
        return out

    return call_and_wait


# -- failures -----------------------------------------------------------------------------------


def _failed(task: CellTask, m: Measurements, failure: StageFailure) -> Record:
    oom = limits.is_out_of_memory(failure.error)
    status = Status.OOM if oom else failure.stage.failure_status
    m.artifacts.update(write_failure_artifacts(task, failure))
    record = Record.finished(
        task.cell, task.run_id, m, status=status, stage=failure.stage, error=failure.error
    )
    classified = failures.signature(failure.error)
    return record.with_changes(error_signature=classified) if classified else record
