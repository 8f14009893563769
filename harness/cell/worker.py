"""One cell, start to finish, in the process that runs it (a Ray worker, or a test).

build -> reference -> export -> check -> ORT session -> run -> numerics -> dynamic
-> latency -> record. Each stage is timed and fails into a status (`StageFailure`),
never into an exception that escapes `run_cell`.
"""

from __future__ import annotations

import concurrent.futures
import copy
import functools
import gc
import inspect
import multiprocessing
import os
import shutil
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch

from harness.cell import exporters, limits
from harness.cell.exporters.request import ExportRequest, Unavailable
from harness.cell.numerics import compare_outputs
from harness.cell.ort import OrtRunner, cuda_provider_missing
from harness.cell.shapes import Inputs, flatten_outputs, second_shape, to_device, to_float64
from harness.cell.stages import StageFailure, stage
from harness.cell.timing import PeakCuda, PeakRss, time_calls
from harness.plan.suites import Protocol
from harness.store.records import CellTask, Latency, Measurements, Record
from harness.store.status import Status
from harness.zoo import ModelSpec, load_source

SEED = 0


class NumericsMismatch(Exception):
    pass


def run_cell(task: CellTask) -> Record:
    """Run one cell and return its record; every failure is a status, never a raise."""
    start = time.perf_counter()
    measured = Measurements()
    spec: ModelSpec | None = None
    try:
        spec = find_spec(task)
        with (
            limits.memory_limit(task.max_memory_gb),
            limits.crash_log(limits.crash_log_path(task.run_dir, task.cell.cell_id)),
        ):
            record = _skip_reason(task, spec) or _run(task, spec, measured)
    except StageFailure as failure:
        record = _failed(task, measured, failure)
    except Exception as exc:  # a bug in the harness itself must still end as a record
        record = Record.finished(
            task.cell, task.run_id, measured, status=Status.HARNESS_ERROR, error=exc
        )
    if spec is not None:
        record = spec.judge(record)
    return record.with_changes(duration_s=time.perf_counter() - start, attempt=task.attempt)


def run_cell_isolated(task: CellTask) -> Record:
    """`run_cell` in a brand-new Python process (spawned, not forked), for a cell whose
    result must not depend on anything an earlier cell left in the process."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        try:
            return pool.submit(run_cell, task).result()
        except concurrent.futures.process.BrokenProcessPool as exc:
            reason = limits.read_crash_log(
                limits.crash_log_path(task.run_dir, task.cell.cell_id)
            ) or str(exc)
            return Record.without_run(
                task.cell, task.run_id, status=Status.CRASHED, reason=f"cell process died: {reason}"
            ).with_changes(attempt=task.attempt)


def find_spec(task: CellTask) -> ModelSpec:
    for spec in load_source(task.source, fresh=True):
        if spec.name == task.cell.model:
            return spec
    raise LookupError(f"model {task.cell.model!r} not found in {task.source}")


def _skip_reason(task: CellTask, spec: ModelSpec) -> Record | None:
    reason = spec.missing_requirement() or exporters.get(task.cell.exporter).unavailable()
    if reason is None and task.cell.device == "cuda":
        reason = (
            "no CUDA device on this worker"
            if not torch.cuda.is_available()
            else cuda_provider_missing()
        )
    if reason is None:
        return None
    return Record.without_run(task.cell, task.run_id, status=Status.SKIPPED, reason=reason)


# -- the stages -------------------------------------------------------------------------------


@dataclass
class Reference:
    inputs: Inputs
    outputs: list[np.ndarray]
    outputs64: list[np.ndarray] | None


def _run(task: CellTask, spec: ModelSpec, m: Measurements) -> Record:
    torch.set_num_threads(task.threads)
    device = task.cell.device
    warm_up_exporter(task.cell.exporter, task.cell.opset)
    model, inputs = _build(spec, device)
    ref = _reference(model, inputs)
    workdir = Path(tempfile.mkdtemp(prefix="harness-cell-"))
    try:
        request = _request(task, spec, model, inputs, len(ref.outputs), workdir)
        _export(task, request, m, spec.max_export_memory_ratio)
        _check(request.path, m)
        runner = OrtRunner(request.path, task.threads, device)
        m.ort_session_s = runner.session_s
        _verify(runner, ref, spec, m)
        if task.cell.dynamic:
            _verify_second_shape(runner, model, inputs, spec, m)
        _latency(runner, model, inputs, task.protocol or Protocol(), m)
        _keep_onnx(task, request.path, m)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return Record.finished(task.cell, task.run_id, m)


class WarmUpModel(torch.nn.Module):
    """A small model over the ops most zoo models use (convolutions, normalisations,
    activations, pooling, resizing, embeddings, attention), so the exporters' per-op lazy
    initialisation is paid here and not by whichever measured cell first needs an op."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.embedding = torch.nn.Embedding(10, 8)
        self.layer_norm = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)

    @staticmethod
    def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
        return torch.rand(1, 3, 8, 8), torch.zeros(1, 64, dtype=torch.long)

    def forward(self, image: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        f = torch.nn.functional
        y = f.relu(self.norm(self.conv(image)))
        y = f.hardswish(self.depthwise(y)) + f.silu(y)
        y = f.interpolate(f.max_pool2d(y, 2), scale_factor=2.0, mode="bilinear")
        gate = f.adaptive_avg_pool2d(y, 1).flatten(1).sigmoid()
        t = y.flatten(2).transpose(1, 2) + self.embedding(ids)
        t = f.gelu(self.fc(self.layer_norm(t)))
        heads = t.reshape(t.shape[0], t.shape[1], 2, 4).permute(0, 2, 1, 3)
        attended = f.scaled_dot_product_attention(heads, heads, heads)
        t = attended.permute(0, 2, 1, 3).reshape(t.shape)
        t = torch.softmax(t @ t.transpose(1, 2), -1) @ t
        return torch.cat([t.mean(1), gate * 2], -1)


WARM_UP_MODEL_MIN_OPSET = 14


class _TrivialModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x)).sum(dim=1)


@functools.cache
def warm_up_exporter(exporter: str, opset: int) -> None:
    """Export and load a warm-up model once per worker process, exporter and opset, before
    any measured export. The first export in a process pays for lazy imports, torch.export's
    and the ONNX function registry's initialisation and ORT's library load (measured
    here: 2-3 s and ~140 MiB on the first dynamo export, ~0 after), and the first use of
    an op pays for its own (5-20 MiB on a vision model's first TorchScript export after a
    trivial warm-up, 2-5 after `WarmUpModel`). Without this the cost lands on whichever
    cell a worker happens to run first, and makes its export time and memory look like a
    regression. Below opset 14 (where TorchScript cannot export `WarmUpModel`, and prints
    its whole graph saying so) a trivial model does."""
    if opset >= WARM_UP_MODEL_MIN_OPSET:
        inputs = Inputs(WarmUpModel.example_inputs(), {}, ("image", "ids"))
        if _warm_up(exporter, opset, WarmUpModel().eval(), inputs):
            return
    _warm_up(exporter, opset, _TrivialModel().eval(), Inputs((torch.rand(2, 4),), {}, ("x",)))


def _warm_up(exporter: str, opset: int, model: torch.nn.Module, inputs: Inputs) -> bool:
    workdir = Path(tempfile.mkdtemp(prefix="harness-warmup-"))
    request = ExportRequest(
        model=model,
        inputs=inputs,
        opset=opset,
        path=workdir / "warmup.onnx",
        output_names=("output_0",),
    )
    try:
        exporters.get(exporter).export(request)
        OrtRunner(request.path, 1, "cpu").run(request.inputs)
        return True
    except Exception:  # the measured export will meet and record the same problem
        return False
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _build(spec: ModelSpec, device: str) -> tuple[torch.nn.Module, Inputs]:
    with stage("build"):
        torch.manual_seed(SEED)
        model = spec.build().eval()
        torch.manual_seed(SEED)
        args = tuple(spec.example_inputs())
        kwargs = dict(spec.example_kwargs()) if spec.example_kwargs else {}
        params = tuple(inspect.signature(model.forward).parameters)
        inputs = Inputs(args, kwargs, params)
        if device != "cpu":
            model, inputs = model.to(device), to_device(inputs, device)
    return model, inputs


def _reference(model: torch.nn.Module, inputs: Inputs) -> Reference:
    with stage("reference"), torch.no_grad():
        outputs = [t.detach().cpu().numpy() for t in flatten_outputs(inputs.call(model))]
    return Reference(inputs, outputs, _reference64(model, inputs))


FLOAT64_MAX_PARAM_BYTES = 512 * 1024**2


def _reference64(model: torch.nn.Module, inputs: Inputs) -> list[np.ndarray] | None:
    """Eager in float64, eager's own noise floor; None where the model cannot run in it,
    or is so large that a float64 copy would cost more memory than the export itself."""
    if sum(p.numel() * 8 for p in model.parameters()) > FLOAT64_MAX_PARAM_BYTES:
        return None
    try:
        model64 = copy.deepcopy(model).cpu().double()
        with torch.no_grad():
            out = flatten_outputs(to_float64(to_device(inputs, "cpu")).call(model64))
        return [t.detach().numpy() for t in out]
    except Exception:
        return None


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
        output_names=tuple(f"output_{i}" for i in range(n_outputs)),
        artifacts=artifacts_dir(task),
    )


def artifacts_dir(task: CellTask) -> Path:
    return Path(task.run_dir) / "artifacts" / task.cell.cell_id


def _export(
    task: CellTask, request: ExportRequest, m: Measurements, memory_ratio: float | None
) -> None:
    exporter = exporters.get(task.cell.exporter)
    try:
        with PeakRss() as peak, PeakCuda(task.cell.device) as peak_cuda:
            exported = exporter.export(request)
    except Unavailable as exc:  # pragma: no cover - only where dynamo_export vanished mid-run
        raise StageFailure("translate", exc) from exc
    except StageFailure as failure:
        facts = exporter.on_failure(request, failure)
        m.aten_ops, m.unsupported_ops = facts.aten_ops, facts.unsupported_ops
        raise
    m.export_phases = {k: round(v, 6) for k, v in exported.phases.items()}
    m.export_s = sum(exported.phases.values())
    m.export_peak_rss_mb = peak.peak_mb
    m.export_peak_cuda_mb = peak_cuda.peak_mb
    m.aten_ops = exporter.aten_ops(request, exported)
    _check_memory_budget(request.model, peak.peak_mb, memory_ratio)


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


def _check(path: Path, m: Measurements) -> None:
    with stage("check"):
        onnx.checker.check_model(str(path), full_check=True)
        model = onnx.load(str(path), load_external_data=False)
    m.opset_actual = next(
        (o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None
    )
    m.onnx_nodes = len(model.graph.node)
    ops: dict[str, int] = {}
    for node in model.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    m.onnx_ops = dict(sorted(ops.items()))
    m.onnx_bytes = sum(f.stat().st_size for f in path.parent.iterdir() if f.is_file())


def _verify(runner: OrtRunner, ref: Reference, spec: ModelSpec, m: Measurements) -> None:
    with stage("ort_run"):
        outputs = runner.run(ref.inputs)
    m.numerics = compare_outputs(
        outputs, ref.outputs, ref.outputs64, runner.output_names, spec.tolerance
    )
    _require_ok("numerics", m.numerics)


def _require_ok(stage_name: str, checks: list[Any]) -> None:
    bad = [c for c in checks if not c.ok]
    if bad:
        detail = "; ".join(
            f"{c.name}: max_abs {c.max_abs}" + (f" ({c.note})" if c.note else "") for c in bad
        )
        raise StageFailure(
            stage_name, NumericsMismatch(f"{len(bad)} of {len(checks)} outputs differ: {detail}")
        )


def _verify_second_shape(
    runner: OrtRunner, model: torch.nn.Module, inputs: Inputs, spec: ModelSpec, m: Measurements
) -> None:
    """Dynamic cells run again at a second shape (batch 1, shorter sequences)."""
    with stage("dynamic"):
        other = second_shape(inputs, spec.dynamic_shapes, spec.dynamic_sizes)
        ref = _reference(model, other)
        outputs = runner.run(other)
    names = [f"{n}@second_shape" for n in runner.output_names]
    checks = compare_outputs(outputs, ref.outputs, ref.outputs64, names, spec.tolerance)
    m.numerics = [*(m.numerics or []), *checks]
    _require_ok("dynamic", checks)


def _latency(
    runner: OrtRunner, model: torch.nn.Module, inputs: Inputs, protocol: Protocol, m: Measurements
) -> None:
    """ORT first, then the session is dropped before eager is timed, so no idle ORT
    thread pool shares the cores with eager (DESIGN.md: latency in a clean state)."""
    with stage("latency"):
        call = runner.bind(inputs)
        m.ort_latency_ms = Latency.from_samples(time_calls(call, protocol))
        del call, runner.session
        gc.collect()
        eager = _eager_call(model, inputs)
        with torch.inference_mode():
            m.eager_latency_ms = Latency.from_samples(time_calls(eager, protocol))


def _eager_call(model: torch.nn.Module, inputs: Inputs) -> Any:
    if not next(iter(inputs.leaves()), torch.empty(0)).is_cuda:
        return lambda: inputs.call(model)

    def call_and_wait() -> Any:
        out = inputs.call(model)
        torch.cuda.synchronize()
        return out

    return call_and_wait


def _keep_onnx(task: CellTask, path: Path, m: Measurements) -> None:
    if not task.keep_onnx:
        return
    target = artifacts_dir(task)
    target.mkdir(parents=True, exist_ok=True)
    for f in path.parent.iterdir():
        shutil.copy2(f, target / f.name)
    m.artifacts["onnx"] = str((target / path.name).relative_to(task.run_dir))


# -- failures -----------------------------------------------------------------------------------


def _failed(task: CellTask, m: Measurements, failure: StageFailure) -> Record:
    oom = limits.is_out_of_memory(failure.error)
    status = Status.OOM if oom else failure.stage.failure_status
    m.artifacts.update(_write_failure_artifacts(task, failure))
    return Record.finished(
        task.cell, task.run_id, m, status=status, stage=failure.stage, error=failure.error
    )


def _write_failure_artifacts(task: CellTask, failure: StageFailure) -> dict[str, str]:
    folder = artifacts_dir(task)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "error.txt").write_text(
        f"stage: {failure.stage}\n" + "".join(traceback.format_exception(failure.error))
    )
    (folder / "repro.py").write_text(_repro_script(task))
    found = {"error": folder / "error.txt", "repro": folder / "repro.py"}
    found.update({f"report:{p.name}": p for p in folder.glob("*.md")})
    return {k: os.path.relpath(p, task.run_dir) for k, p in found.items()}


def _repro_script(task: CellTask) -> str:
    c = task.cell
    return f'''"""Reproduce {c.label()} outside the harness: python repro.py"""
from harness.cell.worker import CellTask, run_cell
from harness.store.records import Cell

task = CellTask(
    cell=Cell({c.model!r}, {c.exporter!r}, {c.opset!r}, {c.device!r}, {c.dynamic!r}, {c.variant!r}, {c.family!r}),
    source={task.source!r},
    run_id="repro",
    run_dir="repro-run",
    threads={task.threads!r},
)
record = run_cell(task)
print(record.status, record.stage, record.error_message)
'''
