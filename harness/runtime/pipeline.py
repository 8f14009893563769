"""The per-cell pipeline: one function per stage, called by whole-model cells
(`harness.runtime.worker`) and sampled cells (`harness.runtime.samples`, once per sample), so
that both apply the cell's export-time patch, run ONNX Runtime on the cell's device and
fail with the same texts and signatures.

device check -> export (with the cell's patch) -> check -> ORT session (the cell's
device) -> run -> numerics -> (a failure's status and signature). Latency and the
dynamic checks are the whole-model path's own (sampled cells are not timed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from harness import exporters
from harness.cell import failures, node, ort_opt
from harness.cell.graph import check as check
from harness.cell.numerics import compare_outputs, largest_finite, tolerance_at
from harness.cell.ort import (
    CudaProviderMissing,
    OrtRunner,
    cuda_provider_missing,
    host_transfers,
)
from harness.cell.precision import (
    KernelMissing,
    input_dtype_problems,
    kernel_missing,
    rounding,
)
from harness.cell.reference import Reference
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure, stage, timed
from harness.cell.timing import PeakCuda, PeakRss
from harness.exporters import patches
from harness.exporters.request import Exported, ExportRequest, ProgramFailed, Unavailable
from harness.runtime import limits
from harness.runtime.artifacts import write_failure_artifacts
from harness.store.error_text import signature_of
from harness.store.measures import PrecisionLoss
from harness.store.records import CellTask, Dtype, Measurements, OutputCheck, Record
from harness.store.status import Status


class NumericsMismatch(Exception):
    """ONNX Runtime's outputs differ from eager's beyond the cell's tolerance."""


class MemoryBudgetExceeded(Exception):
    pass


def require_device(device: str) -> None:
    """Known before the export: a CUDA cell that ORT would run on the CPU fails here, at
    `ort_session`, never as a quiet skip or a CPU run (`OrtRunner` also checks each
    session)."""
    if device == "cuda" and (why := cuda_provider_missing()):
        raise StageFailure("ort_session", CudaProviderMissing(why))


# -- export -------------------------------------------------------------------------------------


def export(
    task: CellTask,
    request: ExportRequest,
    m: Measurements,
    *,
    memory_ratio: float | None = None,
    peaks: bool = True,
) -> Exported:
    """The export call with the cell's patch in place around it (none: the plain call);
    its time, phases and ATen ops into `m.export`, and what a failed export still tells.
    `peaks`: measure peak memory (a sampled cell does not: it sums its samples, and a
    peak's baseline costs a garbage collection per sample)."""
    with patches.get(task.cell.patch).applied():
        return _export_call(task, request, m, memory_ratio, peaks)


def _export_call(
    task: CellTask,
    request: ExportRequest,
    m: Measurements,
    memory_ratio: float | None,
    peaks: bool,
) -> Exported:
    exporter = exporters.get(task.cell.exporter)
    peak, peak_cuda = PeakRss(), PeakCuda(task.cell.device)
    try:
        # one export at a time on the node, on a core of its own beside other cells'
        # one-thread work: two real-size exports side by side took 1.24-1.38 times as long
        # as alone, one beside a loop 1.02-1.05 (benchmarks/README.md, Real size)
        with node.exporting(task.threads, task.cell.device), timed("export"):
            if peaks:
                with peak, peak_cuda:
                    exported = exporter.export(request)
            else:
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
        peak_rss_mb=exported.program_peak_rss_mb or peak.peak_mb,
        peak_cuda_mb=peak_cuda.peak_mb,
        aten_ops=exporter.aten_ops(request, exported),
        weights_mb=round(weights_mb(request.model), 6),
    )
    _check_memory_budget(request.model, peak.peak_mb, memory_ratio)
    return exported


def weights_mb(model: torch.nn.Module) -> float:
    """The model's parameters and buffers, in MiB (each tensor once, however shared)."""
    tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}
    return sum(t.numel() * t.element_size() for t in tensors.values()) / 1024**2


def _check_memory_budget(
    model: torch.nn.Module, peak_mb: float | None, ratio: float | None
) -> None:
    """A zoo entry may cap export memory at a multiple of its weights (the large model:
    an exporter holding extra copies of 2 GB of weights is a regression)."""
    if ratio is None or peak_mb is None:
        return
    weights = weights_mb(model)
    if peak_mb > ratio * weights:
        raise StageFailure(
            "save",
            MemoryBudgetExceeded(
                f"export peak {peak_mb:.0f} MiB is over {ratio:g} x the weights ({weights:.0f} MiB)"
            ),
        )


# -- ONNX Runtime -------------------------------------------------------------------------------


def session(
    task: CellTask,
    request: ExportRequest,
    m: Measurements,
    dtype: str | None = None,
    model_type: str = "bert",
    fused: bool = False,
) -> OrtRunner:
    """The ORT session that checks numerics, on the cell's device (CUDA: the CUDA provider
    in float32, not TF32, or the cell fails at `ort_session` with `CudaProviderMissing`),
    over the graph the cell's ORT optimisation gives (harness.cell.ort_opt); its load time
    and what the optimisation did into `m.ort`. A reduced-precision graph (`dtype`: the
    cell's, or a sampled entry's) that ORT has no kernel for fails with `KernelMissing`
    naming the op. `fused`: the exporter made the cell's ORT fusions itself (a default
    session judges its graph; the fused ops are its contrib ops)."""
    dtype = dtype or (task.cell.dtype.value if task.cell.dtype.reduced else None)
    try:
        prepared = (
            ort_opt.fused_at_export(request.path)
            if fused
            else ort_opt.prepare(task.cell.ort_opt, request.path, model_type)
        )
        partitioned = _partitioned(task, prepared)
        runner = OrtRunner(
            prepared.path,
            task.threads,
            task.cell.device,
            tf32=False,
            optimisation=replace(prepared.optimisation, written_to=partitioned),
        )
    except StageFailure as failure:
        missing = dtype and kernel_missing(failure.error, dtype)
        if missing:
            raise StageFailure("ort_session", missing) from failure.error
        raise
    runner.order_outputs(request.output_names)
    m.ort = replace(
        m.ort,
        session_s=runner.session_s,
        fused_ops=prepared.fused_ops,
        optimizers=prepared.optimizers,
        host_transfers=_host_transfers(partitioned),
    )
    return runner


PARTITIONED = "cuda_partitioned.onnx"


def _partitioned(task: CellTask, prepared: ort_opt.Prepared) -> Path | None:
    """Where a CUDA cell's session writes its graph as placed on providers (the graph it
    runs, host<->device copies included); nowhere on the CPU."""
    return prepared.path.with_name(PARTITIONED) if task.cell.device == "cuda" else None


def _host_transfers(partitioned: Path | None) -> dict[str, int] | None:
    """The copy nodes of a CUDA session's graph; the written graph is dropped after."""
    if partitioned is None:
        return None
    try:
        return host_transfers(partitioned)
    finally:
        for written in (partitioned, partitioned.with_name(f"{partitioned.name}.data")):
            written.unlink(missing_ok=True)


def run(runner: OrtRunner, inputs: Inputs, where: str = "ort_run") -> list[np.ndarray]:
    """The graph's outputs on `inputs`, complex ones as real views (as the exporter writes
    them); a failure is the stage `where`'s."""
    with stage(where):
        return [real_view(np.asarray(a)) for a in runner.run(inputs)]


def real_view(a: np.ndarray) -> np.ndarray:
    """A complex array as [..., 2] reals: how the dynamo exporter writes complex values."""
    if np.iscomplexobj(a):
        return np.stack([a.real, a.imag], axis=-1)
    return a


# -- numerics -----------------------------------------------------------------------------------


def compare(
    got: Sequence[np.ndarray],
    want: Sequence[np.ndarray],
    want64: Sequence[np.ndarray] | None,
    names: Sequence[str],
    tolerance: tuple[float, float] | None,
) -> list[OutputCheck]:
    """ORT's outputs against eager's (both as real views) by the numerics gate."""
    return _compare(got, want, want64, names, tolerance)


def _compare(
    got: Sequence[np.ndarray],
    want: Sequence[np.ndarray],
    want64: Sequence[np.ndarray] | None,
    names: Sequence[str],
    tolerance: tuple[float, float] | None,
    *,
    rounding: float | None = None,
) -> list[OutputCheck]:
    real64 = None if want64 is None else [real_view(np.asarray(a)) for a in want64]
    return compare_outputs(
        [real_view(np.asarray(a)) for a in got],
        [real_view(np.asarray(a)) for a in want],
        real64,
        names,
        tolerance,
        rounding=rounding,
    )


def judge(
    got: Sequence[np.ndarray],
    ref: Reference,
    names: Sequence[str],
    tolerance: tuple[float, float] | None,
    dtype: Dtype,
) -> list[OutputCheck]:
    """Export fidelity: ORT against eager at the cell's dtype. A reduced-precision cell is
    judged by the dtype's tolerance (torch's `assert_close` table, or the entry's where
    looser) with the float32 model as its truth and the dtype's rounding of it as noise
    (harness.cell.numerics)."""
    if not dtype.reduced:
        return compare(got, ref.outputs, ref.outputs64, names, tolerance)
    at = tolerance_at(dtype, tolerance)
    return _compare(got, ref.outputs, ref.outputs64, names, at, rounding=rounding(dtype))


def precision_loss(
    got: Sequence[np.ndarray], ref: Reference, names: Sequence[str], dtype: Dtype
) -> PrecisionLoss:
    """Eager's and ORT's outputs at the cell's dtype against the float32 model's: which of
    them loses precision (a model not safe at the dtype, or an export that overflows where
    eager does not). Rounding to the dtype is no loss: an element is lost where it is off
    by more than the dtype's `rounding`, relative to itself and to the output's largest
    value (up to 1% of the elements may be)."""
    truth = [np.asarray(t, dtype=np.float32) for t in ref.outputs64 or []]
    eager = [np.asarray(a).astype(np.float32) for a in ref.outputs]
    ort = [np.asarray(a).astype(np.float32) for a in got]
    return PrecisionLoss(
        eager=_against_float32(eager, truth, names, dtype),
        ort=_against_float32(ort, truth, names, dtype),
    )


def _against_float32(
    got: Sequence[np.ndarray], truth: Sequence[np.ndarray], names: Sequence[str], dtype: Dtype
) -> list[OutputCheck]:
    lost = rounding(dtype)
    checks = []
    for g, t, name in zip(got, truth, names, strict=False):
        found = largest_finite(t)
        scale = 1.0 if found is None else found
        checks += _compare([g], [t], None, [name], (lost, lost * scale), rounding=lost)
    return checks


def require_input_dtypes(runner: OrtRunner, inputs: Inputs) -> None:
    """The graph takes the model's input dtypes (no silent float32 I/O in a float16 model):
    else a numerics failure naming the inputs."""
    problems = input_dtype_problems(runner.input_types(), runner.feeds(inputs))
    if problems:
        raise StageFailure("numerics", NumericsMismatch("; ".join(problems)))


def require_ok(where: str, checks: list[OutputCheck]) -> None:
    """A `StageFailure(where, NumericsMismatch)` where an output differs: the same text,
    hence the same signature, for a whole model and a sample."""
    bad = [c for c in checks if not c.ok]
    if bad:
        raise StageFailure(where, NumericsMismatch(mismatch_text(bad, len(checks))))


def mismatch_text(bad: list[OutputCheck], outputs: int) -> str:
    """'1 of 2 outputs differ: values beyond tolerance' on the first line, without numbers
    or names: the error signature groups one kind of mismatch across models, samples and
    ops. Each differing output follows on a line of its own (name, max_abs, note)."""
    kinds = dict.fromkeys(_kind(c) for c in bad)
    detail = [f"{c.name}: max_abs {c.max_abs}" + (f" ({c.note})" if c.note else "") for c in bad]
    return "\n".join([f"{len(bad)} of {outputs} outputs differ: {', '.join(kinds)}", *detail])


def _kind(c: OutputCheck) -> str:
    note = c.note or ""
    if note.startswith("shape"):
        return "shape differs"
    if note.startswith("dtype"):
        return "dtype differs"
    if note.startswith("ONNX model has"):
        return "number of outputs differs"
    if "NaN/inf" in note:
        return "NaN/inf where eager has none or another"
    if c.max_abs is None and c.mismatches is None:
        return "shape or dtype differs"
    return "values beyond tolerance"


# -- a failure's verdict ------------------------------------------------------------------------


def failure_status(failure: StageFailure) -> Status:
    """`oom` where the failure is the memory limit's, `runtime_missing` where the runtime
    has no kernel for a reduced-precision graph, the program's own where an exporter run
    as a program crashed or hung, else its stage's failure status."""
    if limits.is_out_of_memory(failure.error):
        return Status.OOM
    if isinstance(failure.error, KernelMissing):
        return Status.RUNTIME_MISSING
    if isinstance(failure.error, ProgramFailed):  # a builder that crashed or hung
        return failure.error.status
    return failure.stage.failure_status


def failure_signature(error: BaseException) -> str:
    """The signature a maintainer can act on (harness.cell.failures) where a rule knows
    the failure, else the generic one."""
    return failures.signature(error) or signature_of(error)


def failed(task: CellTask, m: Measurements, failure: StageFailure) -> Record:
    """The record of a cell that failed at a stage: its status, the error, its signature
    and the failure's artifacts (error.txt, repro.py, the exporter's report)."""
    m.artifacts.update(write_failure_artifacts(task, failure))
    record = Record.finished(
        task.cell,
        task.run_id,
        m,
        status=failure_status(failure),
        stage=failure.stage,
        error=failure.error,
    )
    return record.with_changes(error_signature=failure_signature(failure.error))
