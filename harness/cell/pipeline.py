"""The per-cell pipeline: one function per stage, called by whole-model cells
(`harness.cell.worker`) and sampled cells (`harness.cell.samples`, once per sample), so
that both apply the cell's export-time patch, run ONNX Runtime on the cell's device and
fail with the same texts and signatures.

device check -> export (with the cell's patch) -> check -> ORT session (the cell's
device) -> run -> numerics -> (a failure's status and signature). Latency and the
dynamic checks are the whole-model path's own (sampled cells are not timed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from harness.cell import exporters, failures, limits, patches
from harness.cell.artifacts import write_failure_artifacts
from harness.cell.exporters.request import Exported, ExportRequest, Unavailable
from harness.cell.graph import check as check
from harness.cell.numerics import compare_outputs
from harness.cell.ort import CudaProviderMissing, OrtRunner, cuda_provider_missing
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure, stage
from harness.cell.timing import PeakCuda, PeakRss
from harness.store.error_text import signature_of
from harness.store.records import CellTask, Measurements, OutputCheck, Record
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
        peak_rss_mb=peak.peak_mb,
        peak_cuda_mb=peak_cuda.peak_mb,
        aten_ops=exporter.aten_ops(request, exported),
    )
    _check_memory_budget(request.model, peak.peak_mb, memory_ratio)
    return exported


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


# -- ONNX Runtime -------------------------------------------------------------------------------


def session(task: CellTask, request: ExportRequest, m: Measurements) -> OrtRunner:
    """The ORT session that checks numerics, on the cell's device (CUDA: the CUDA provider
    in float32, not TF32, or the cell fails at `ort_session` with `CudaProviderMissing`);
    its load time into `m.ort`."""
    runner = OrtRunner(request.path, task.threads, task.cell.device, tf32=False)
    m.ort = replace(m.ort, session_s=runner.session_s)
    return runner


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
    real64 = None if want64 is None else [real_view(np.asarray(a)) for a in want64]
    return compare_outputs(
        [real_view(np.asarray(a)) for a in got],
        [real_view(np.asarray(a)) for a in want],
        real64,
        names,
        tolerance,
    )


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
    """`oom` where the failure is the memory limit's, else its stage's failure status."""
    return Status.OOM if limits.is_out_of_memory(failure.error) else failure.stage.failure_status


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
