"""One cell, start to finish, in the process that runs it: a child of the worker's zygote
(harness.runtime.zygote), which exits with whatever the cell did to it; or a test.

build -> reference -> export -> check -> ORT session -> run -> numerics -> dynamic
-> latency -> record. Each stage is timed and fails into a status (`StageFailure`),
never into an exception that escapes `run_cell`.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal, TypeVar

import torch

from harness import exporters
from harness.cell import generation, node, ort_opt
from harness.cell.dynamic import (
    NoBatchDimension,
    at_batch,
    fixed_dims,
    latency_shapes,
    specialised_error,
    verification_shapes,
)
from harness.cell.graph_store import keep_graph
from harness.cell.numerics import DEFAULT_TOLERANCE, tolerance_at
from harness.cell.ort import Optimisation, OrtRunner
from harness.cell.precision import cast_inputs
from harness.cell.reference import Reference, at_dtype, build, by_name, reference_at
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure, clocked, stage
from harness.cell.timing import freeze_survivors
from harness.exporters import patches
from harness.exporters.request import Components, Exported, ExportRequest, Refused
from harness.runtime import components, latency, limits, mismatch, pipeline
from harness.runtime import tokens as graph_tokens
from harness.runtime.artifacts import artifacts_dir, keep_onnx
from harness.runtime.samples import run_sampled
from harness.runtime.warmup import measure_cold_start, take_cold_start, warm_up_exporter
from harness.store.axes import BATCH
from harness.store.details import WorkerInfo
from harness.store.protocol import Protocol
from harness.store.records import (
    NO_PATCH,
    CellTask,
    Dtype,
    Measurements,
    OrtOpt,
    Record,
)
from harness.store.status import Status
from harness.zoo import ModelSpec
from harness.zoo.discovery import load_source

# The share of the cell's timeout an export run as a program may take: it is stopped first,
# so that its record holds the program's last lines (the zygote's kill leaves none).
EXPORT_SHARE = 0.75
_T = TypeVar("_T")


def run_cell(task: CellTask) -> Record:
    """Run one cell and return its record; every failure is a status, never a raise."""
    start = time.perf_counter()
    measured = Measurements()
    freeze_survivors()
    notes = limits.stage_notes_path(task.run_dir, task.cell.cell_id)
    notes.unlink(missing_ok=True)  # an earlier attempt's (its worker lost): not this one's
    # debt's tries run cells in one hold: each its own waits and neighbours
    waits_before, beside_before = node.process_waited_s(), len(node.timed_beside())
    with clocked(notes) as clock, node.holding(label=task.cell.label()):
        record = _record(task, measured)
    notes.unlink(missing_ok=True)  # it ended with its record: nothing to tell
    worker = WorkerInfo(
        cold_start=take_cold_start(task.cell.exporter),
        node_wait_s=round(node.process_waited_s() - waits_before, 4) or None,
        timed_beside=tuple(dict.fromkeys(node.timed_beside()[beside_before:])) or None,
    )
    return record.with_changes(
        duration_s=time.perf_counter() - start,
        stage_s={name: round(seconds, 4) for name, seconds in clock.items()} or None,
        attempt=task.attempt,
        worker=worker if worker != WorkerInfo() else None,
    )


def _record(task: CellTask, measured: Measurements) -> Record:
    """The cell's record: skipped, finished, failed at a stage, or the harness's own error."""
    try:
        spec = find_spec(task.source, task.cell.model)
        with (
            limits.memory_limit(task.max_memory_gb),
            limits.crash_log(limits.crash_log_path(task.run_dir, task.cell.cell_id)),
        ):
            return _skip_reason(task, spec) or _run_spec(task, spec, measured)
    except StageFailure as failure:
        return pipeline.failed(task, measured, failure)
    except Refused as refused:  # a builder's unsupported architecture or precision
        return Record.without_run(
            task.cell, task.run_id, status=Status.SKIPPED, reason=str(refused)
        )
    except Exception as exc:  # a bug in the harness itself must still end as a record
        return Record.finished(
            task.cell, task.run_id, measured, status=Status.HARNESS_ERROR, error=exc
        )


def find_spec(source: str, model: str) -> ModelSpec:
    for spec in load_source(source):
        if spec.name == model:
            return spec
    raise LookupError(f"model {model!r} not found in {source}")


def _skip_reason(task: CellTask, spec: ModelSpec) -> Record | None:
    exporter = exporters.get(task.cell.exporter)
    reason = (
        spec.missing_requirement()
        or exporter.unavailable()
        or patches.get(task.cell.patch).unavailable()
        or patches.get(task.cell.patch).pointless(spec.metadata)
        or _patch_out_of_reach(exporter, task.cell.patch)
    )
    if reason is None and task.cell.device == "cuda" and not torch.cuda.is_available():
        reason = "no CUDA device on this worker"
    if reason is None:
        return None
    return Record.without_run(task.cell, task.run_id, status=Status.SKIPPED, reason=reason)


def _patch_out_of_reach(exporter: exporters.Exporter, patch: str) -> str | None:
    """A patch changes the cell's process: an exporter run as a program of its own (a
    model builder) never meets it."""
    if exporter.in_process or patch == NO_PATCH:
        return None
    return f"the patch {patch} acts in the cell's process; {exporter.name} runs as a program of its own"


# -- the stages -------------------------------------------------------------------------------


def _run_spec(task: CellTask, spec: ModelSpec, m: Measurements) -> Record:
    """A whole model, or a sampled entry (one OpInfo at a dtype) sample by sample: both
    through the stages of harness.runtime.pipeline."""
    pipeline.require_device(task.cell.device)
    run = run_sampled if spec.samples is not None else _run
    return run(task, spec, m)


def _run(task: CellTask, spec: ModelSpec, m: Measurements) -> Record:
    torch.set_num_threads(task.threads)
    device = task.cell.device
    measure_cold_start(task.cell.exporter)
    warm_up_exporter(task.cell.exporter, task.cell.opset)
    model32, inputs32 = build(spec, device)
    try:
        inputs32 = at_batch(spec, model32, inputs32, task.cell[BATCH])
    except NoBatchDimension as exc:
        return Record.without_run(task.cell, task.run_id, status=Status.SKIPPED, reason=str(exc))
    if reason := exporters.get(task.cell.exporter).refuses(model32):
        return Record.without_run(task.cell, task.run_id, status=Status.SKIPPED, reason=reason)
    dtype = task.cell.dtype
    model, ref = at_dtype(model32, inputs32, dtype)
    inputs = ref.inputs
    how = generation.recipe(spec, task.cell)
    tokens = graph_tokens.reference(model, how) if how is not None else None
    workdir = Path(tempfile.mkdtemp(prefix="harness-cell-"))
    try:
        request = _request(task, spec, model, inputs, len(ref.outputs), workdir)
        saved, runner = request.path, None  # the graph a user keeps, the session that ran it
        try:
            exported = pipeline.export(task, request, m, memory_ratio=spec.max_export_memory_ratio)
            saved = exported.path
            if exported.components is not None:
                _judge_components(task, spec, exported.components, model, tokens, m)
            else:
                models = (model32, model)
                runner = _judge_graph(
                    task, spec, request, exported, models, inputs32, ref, tokens, m
                )
        finally:  # a model that exported and then failed is the one a user keeps to debug
            if m.export.seconds is not None:
                keep_onnx(task, saved, m)
        if runner is not None:
            keep_graph(task, request.path, runner.feeds(inputs), m)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return Record.finished(task.cell, task.run_id, m)


def _judge_graph(
    task: CellTask,
    spec: ModelSpec,
    request: ExportRequest,
    exported: Exported,
    models: tuple[torch.nn.Module, torch.nn.Module],
    inputs32: Inputs,
    ref: Reference,
    tokens: tuple[torch.Tensor, generation.Greedy] | None,
    m: Measurements,
) -> OrtRunner:
    """One graph: checked, run against eager at the cell's dtype (and at other shapes in a
    dynamic cell), generating eager's tokens where the entry generates, then timed.
    `models`: the float32 model and the cell's at its dtype."""
    model32, model = models
    dtype = task.cell.dtype
    fused = exported.fused_at_export
    pipeline.check(request.path, m, ort_only=fused)
    runner = pipeline.session(task, request, m, model_type=_model_type(spec), fused=fused)
    how = generation.recipe(spec, task.cell) or {}
    if tokens is not None and exported.genai_folder is not None:  # its users' path, first
        graph_tokens.served(exported.genai_folder, model, tokens, how, dtype, spec.tolerance, m)
    diagnose = lambda: _diagnose(task, request, exported, spec, ref, m)  # noqa: E731
    if not exported.from_checkpoint:
        _verify(runner, ref, spec, dtype, m, diagnose)
    if task.cell.dynamic:
        _verify_dynamic(runner, models, inputs32, spec, dtype, m, first=exported.from_checkpoint)
    if tokens is not None:
        made = (request, exported, task.cell.exporter)
        graph_tokens.one_graph(runner, model, spec, made, tokens, how, dtype, m)
    shapes = _timed_shapes(task, spec, model32, inputs32)
    protocol = task.protocol or Protocol()
    latency.measure(runner, model, shapes, protocol, m, latency.EagerShare.of(task, protocol))
    return runner


def _judge_components(
    task: CellTask,
    spec: ModelSpec,
    parts: Components,
    model: torch.nn.Module,
    tokens: tuple[torch.Tensor, generation.Greedy] | None,
    m: Measurements,
) -> None:
    """A generative export (transformers' `export_for_generation`): each component checked
    and judged on the kwargs transformers traced it with, then generation through them."""
    fused = task.cell.ort_opt is OrtOpt.FUSIONS
    components.check_graphs(parts, m, ort_only=fused)
    if fused:
        fused_ops = ort_opt.contrib_ops(parts.paths.values())
        m.ort = replace(m.ort, fused_ops=fused_ops, optimizers=["exporter"])
    found = components.judge(parts, spec.tolerance, task.protocol or Protocol())
    m.numerics = replace(m.numerics, components=found)
    components.step_latency(found, m)
    components.require_ok(found, m.ort.fused_ops)
    if tokens is not None:
        how = generation.recipe(spec, task.cell) or {}
        tolerance = tolerance_at(task.cell.dtype, spec.tolerance)
        graph_tokens.judge_components(parts, model, tokens, how, tolerance, m)


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
        ort_fusions=_fusions_for(task.cell.device) if task.cell.ort_opt is OrtOpt.FUSIONS else None,
        dtype=task.cell.dtype,
        device=task.cell.device,
        timeout_s=None if task.timeout_s is None else task.timeout_s * EXPORT_SHARE,
        registry_memo=(task.protocol or Protocol()).registry_memo,
    )


def _fusions_for(device: str) -> Literal["cpu", "cuda"]:
    """The execution provider ORT fuses a cell's graph for."""
    return "cuda" if device == "cuda" else "cpu"


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


def _verify(
    runner: OrtRunner,
    ref: Reference,
    spec: ModelSpec,
    dtype: Dtype,
    m: Measurements,
    diagnose: Callable[[], None],
) -> None:
    """ORT's outputs against eager's at the cell's dtype; a reduced-precision cell also
    measures both against the float32 model (`precision_loss`)."""
    pipeline.require_input_dtypes(runner, ref.inputs)
    outputs = pipeline.run(runner, ref.inputs)
    checks = pipeline.judge(outputs, ref, runner.output_names, spec.tolerance, dtype)
    m.numerics = replace(m.numerics, checks=checks)
    if dtype.reduced:
        loss = pipeline.precision_loss(outputs, ref, runner.output_names, dtype)
        m.numerics = replace(m.numerics, precision_loss=loss)
    if not all(c.ok for c in checks):
        diagnose()
    pipeline.require_ok("numerics", checks)


def _diagnose(
    task: CellTask,
    request: ExportRequest,
    exported: Exported,
    spec: ModelSpec,
    ref: Reference,
    m: Measurements,
) -> None:
    """The first divergent node, the stage that changed the numbers, and the ORT optimizer
    that did, where one did (harness.cell.ort_opt)."""
    exporter = exporters.get(task.cell.exporter)
    mismatch.diagnose(exporter, request, exported, ref, spec.tolerance or DEFAULT_TOLERANCE, m)
    cell = task.cell

    def passes(path: Path, optimisation: Optimisation) -> bool:
        runner = OrtRunner(path, task.threads, cell.device, tf32=False, optimisation=optimisation)
        outputs = pipeline.run(runner, ref.inputs)
        checks = pipeline.judge(outputs, ref, runner.output_names, spec.tolerance, cell.dtype)
        return all(c.ok for c in checks)

    with contextlib.suppress(Exception):  # a diagnosis never changes the cell's verdict
        found = ort_opt.culprit(cell.ort_opt, request.path, passes, _model_type(spec))
        m.ort = replace(m.ort, broken_by=found)


def _model_type(spec: ModelSpec) -> str:
    """The model type onnxruntime.transformers' optimizer fuses the entry's graph as (an
    entry's `ort_model_type` metadata: bert, gpt2, t5, ...; bert by default)."""
    return str(spec.metadata.get("ort_model_type", "bert"))


def _verify_dynamic(
    runner: OrtRunner,
    models: tuple[torch.nn.Module, torch.nn.Module],
    inputs32: Inputs,
    spec: ModelSpec,
    dtype: Dtype,
    m: Measurements,
    *,
    first: bool = False,
) -> None:
    """Dynamic cells: every declared-dynamic dimension stays dynamic in the graph (else a
    `dynamic_mismatch` naming it, even where other shapes would run), and the graph gives
    eager's numbers again at each verification shape (default: batch 1, shorter sequences).
    `models`: the float32 model, which makes the other shapes, and the cell's at its dtype.
    `first`: these shapes are the graph's only checks (a builder's graph): a failure there
    is the run's or the numbers', and its outputs are matched to eager's by name."""
    model32, model = models
    fixed = fixed_dims(runner.path, inputs32, spec.dynamic_shapes)
    if fixed:
        raise StageFailure("dynamic", specialised_error(fixed))
    run_at, judged_at = ("ort_run", "numerics") if first else ("dynamic", "dynamic")
    checks = []
    for label, other in _shapes(lambda: verification_shapes(spec, model32, inputs32)):
        with stage("dynamic"):
            ref = reference_at(model32, model, other, dtype)
        if first:
            ref = by_name(ref, spec.output_names, runner.output_names)
        outputs = pipeline.run(runner, ref.inputs, run_at)
        names = [f"{n}@{label}" for n in runner.output_names]
        checks += pipeline.judge(outputs, ref, names, spec.tolerance, dtype)
    m.numerics = replace(m.numerics, checks=[*(m.numerics.checks or []), *checks])
    pipeline.require_ok(judged_at, checks)


def _shapes(make: Callable[[], _T]) -> _T:
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
    dtype = task.cell.dtype
    shapes = {**named} if named else {"example": (None, inputs)}
    return {name: (sizes, cast_inputs(at, dtype)) for name, (sizes, at) in shapes.items()}
