"""What an export is asked to do and what it gives back (no torch import: the registry
and planning use these names too)."""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from harness.store.axes import Dtype
from harness.store.details import Divergence, MismatchStage
from harness.store.status import Status

if TYPE_CHECKING:
    import torch

    from harness.cell.reference import Reference
    from harness.cell.shapes import Inputs
    from harness.zoo.spec import DynamicShapes


@dataclass
class Components:
    """What a generative export gives the cell (harness.runtime.components): transformers'
    `ExportedModel` (its runners), each component's saved graph, and each component's
    eager submodule and the kwargs it was traced with."""

    exported: Any  # transformers.exporters.ExportedModel
    paths: dict[str, Path]
    traced: dict[str, tuple[torch.nn.Module, dict[str, Any]]]
    # An encoder-decoder's encoder, exported apart (`export_for_generation` leaves it out:
    # `generate` runs it before the steps): its ExportedModel, whose runner generation runs.
    encoder: Any = None


@dataclass
class Exported:
    path: Path
    phases: dict[str, float | None]  # None: a phase this torch offers no hook to observe
    aten_ops: dict[str, int] | None = None
    seconds: float | None = None  # the wall time of the whole exporter call
    # The program the exporter translated (dynamo: its ExportedProgram), for locating the
    # first divergent node of a numerics mismatch; None where there is none.
    program: torch.export.ExportedProgram | None = None
    # dynamo: the program torch.export captured, before the exporter's decompositions.
    captured: torch.export.ExportedProgram | None = None
    notes: list[str] = field(default_factory=list)
    # A generative export's components (transformers' `export_for_generation`): the cell
    # judges each of them, not `path` alone (harness.runtime.components).
    components: Components | None = None
    fused_at_export: bool = False  # the exporter made the cell's ORT fusions itself
    # An exporter run as a program of its own (a model builder): that program's peak RSS,
    # the export's peak memory (the cell's process only waits for it).
    program_peak_rss_mb: float | None = None
    # A folder onnxruntime_genai's Generator loads (its genai_config.json beside the graph),
    # where the exporter wrote one (the model builders).
    genai_folder: Path | None = None
    # A graph written from the checkpoint (a model builder): it runs a prompt from an empty
    # past or one token after a past (ORT's GroupQueryAttention refuses several new tokens
    # after a past at batch > 1), so it is judged at the entry's prefill and decode-step
    # shapes only, where a failure is the run's or the numbers' (not a dynamic mismatch),
    # its outputs matched to eager's by name (a builder keeps no sliding window's counter).
    from_checkpoint: bool = False

    @property
    def export_s(self) -> float:
        """The whole call where it was timed, else the sum of its phases."""
        if self.seconds is not None:
            return self.seconds
        return sum(v for v in self.phases.values() if v is not None)


@dataclass(frozen=True)
class ExportRequest:
    model: torch.nn.Module
    inputs: Inputs
    opset: int
    path: Path
    dynamic_shapes: DynamicShapes | None = None  # None for static cells
    output_names: tuple[str, ...] = ()
    artifacts: Path | None = None  # where a failing export leaves the exporter's report
    # The cell's ORT fusions (`--ort-opt fusions`) for the execution provider of its device
    # ('cpu', 'cuda'): an exporter that fuses at export (transformers' `OnnxConfig(
    # ort_fusions=...)`) does; for the others the session fuses the graph afterwards.
    ort_fusions: Literal["cpu", "cuda"] | None = None
    # The cell's dtype and device, for an exporter that builds at a precision of its own
    # choosing (a model builder's `--precision`), and the seconds its program may run.
    dtype: Dtype = Dtype.FLOAT32
    device: str = "cpu"
    timeout_s: float | None = None
    # dynamo's registry built once per process (the protocol's `registry_memo`) for the
    # dynamo and transformers exporters' calls, or afresh in every call as a user's builds it
    registry_memo: bool = True


@dataclass(frozen=True)
class FailureFacts:
    """What a failed export still tells: the ATen ops of the graph it started from, the ops
    it could not translate, and files it left (the exporter's own report)."""

    aten_ops: dict[str, int] | None = None
    unsupported_ops: list[str] | None = None


class Unavailable(Exception):
    """The exporter does not exist in the installed torch: the cell is skipped."""


class Refused(Exception):
    """The exporter, once asked, does not take the cell's model or precision (a model
    builder's unsupported architecture, a precision it does not build for the device): the
    cell is skipped with the exporter's own reason."""


class ProgramFailed(Exception):
    """An exporter run as a program of its own ended without a graph the cell can judge:
    `status` says how (crashed, timeout, export_failed), the message ends with the
    program's last lines."""

    def __init__(self, message: str, status: Status) -> None:
        super().__init__(message)
        self.status = status


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The exporters print progress and deprecation chatter; keep worker logs readable."""
    loggers = [
        logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._dynamo", "onnxscript")
    ]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


class Opaque:
    """The diagnoses of an exporter whose own program the harness does not see: no ATen ops,
    no first divergent node, no stage attribution, nothing more from a failure. `name` is
    the registry's, `call` the exporter as the reasons name it."""

    name = ""
    call = ""

    def aten_ops(self, request: ExportRequest, exported: Exported) -> dict[str, int] | None:
        return None

    def first_divergence(
        self, request: ExportRequest, exported: Exported, tolerance: tuple[float, float]
    ) -> Divergence:
        return Divergence(reason=f"not located for {self.call}")

    def mismatch_stage(
        self,
        request: ExportRequest,
        exported: Exported,
        reference: Reference,
        tolerance: tuple[float, float],
    ) -> MismatchStage:
        return MismatchStage(reason=f"{self.name}: no stage-by-stage comparison")

    def on_failure(self, request: ExportRequest, error: BaseException) -> FailureFacts:
        return FailureFacts()


@runtime_checkable
class ExporterAdapter(Protocol):
    """What an exporter's implementation module gives the registry: its `Adapter`, built
    with the registry entry's options (harness.exporters.Exporter.adapter). mypy
    checks each implementation against it (harness/exporters/__init__.py)."""

    def unavailable(self) -> str | None:
        """None when the installed torch has this exporter, else why its cells are skipped."""
        ...

    def refuses(self, model: torch.nn.Module) -> str | None:
        """Why this exporter does not take `model` (its cell is skipped), or None."""
        ...

    def sample(self) -> tuple[torch.nn.Module, Inputs] | None:
        """A small model this exporter takes, with its inputs, for the process's warm-up and
        cold start where the harness's own models are not (None: those do)."""
        ...

    def export(self, request: ExportRequest) -> Exported:
        """The user's export call; a failure is a `StageFailure` naming its phase."""
        ...

    def aten_ops(self, request: ExportRequest, exported: Exported) -> dict[str, int] | None:
        """ATen overloads (or TorchScript op names) in the graph the exporter started from."""
        ...

    def first_divergence(
        self, request: ExportRequest, exported: Exported, tolerance: tuple[float, float]
    ) -> Divergence:
        """Where a numerics mismatch starts: the first ONNX node over tolerance (name,
        op_type, ATen op, source line), or the reason this exporter cannot say."""
        ...

    def mismatch_stage(
        self,
        request: ExportRequest,
        exported: Exported,
        reference: Reference,
        tolerance: tuple[float, float],
    ) -> MismatchStage:
        """Which stage changed the numbers of a mismatch (capture, translation,
        optimization, runtime) and which optimizer step, or why this exporter cannot say."""
        ...

    def on_failure(self, request: ExportRequest, error: BaseException) -> FailureFacts:
        """What a failed export still tells: ATen ops, unsupported ops, the exporter's report."""
        ...
