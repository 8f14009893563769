"""The exporter registry: the one place that knows each exporter.

An `Exporter` carries its name, the opsets it takes, and (from its implementation
module, imported on first use because it imports torch) whether the installed torch has
it, the export call, how to read the ATen ops it started from, and what a failed export
still tells (unsupported ops, the exporter's own report). Planning validates suites
against the registry without importing torch; the worker asks the registry and never
branches on an exporter's name. Only the implementation modules call `torch.onnx`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.exporters.request import Exported, ExporterAdapter, ExportRequest, FailureFacts
from harness.store.details import Divergence, MismatchStage

if TYPE_CHECKING:
    import torch

    from harness.cell.reference import Reference
    from harness.cell.shapes import Inputs
    from harness.exporters import dynamo, dynamo_legacy, genai_builder, hf, mobius, torchscript

    # mypy checks that each implementation satisfies the protocol.
    _ADAPTERS: tuple[type[ExporterAdapter], ...] = (
        dynamo.Adapter,
        dynamo_legacy.Adapter,
        torchscript.Adapter,
        hf.Adapter,
        genai_builder.Adapter,
        mobius.Adapter,
    )


@dataclass(frozen=True)
class Exporter:
    name: str
    description: str
    min_opset: int
    max_opset: int
    implementation: str  # the module that implements it (it imports torch)
    options: tuple[tuple[str, bool], ...] = ()  # keyword arguments of its `Adapter`
    # The export's peak RSS over the model's weights, as the real-size suite measured it
    # (benchmarks/README.md, "Real size"): what a cell's memory need is sized from.
    export_memory: float = 2.0
    # The export runs in the cell's process (False: a model builder, a program of its own
    # run as a subprocess: no in-process warm-up or cold start to take apart).
    in_process: bool = True

    def opset_problem(self, opset: int) -> str | None:
        """Why this exporter cannot take `opset`, or None."""
        if self.min_opset <= opset <= self.max_opset:
            return None
        return f"opset {opset} is outside what {self.name} can take ({self.min_opset}..{self.max_opset})"

    def adapter(self) -> ExporterAdapter:
        """The implementation module's `Adapter` with this entry's options (the module is
        imported here, on first use: it imports torch)."""
        module = importlib.import_module(self.implementation)
        adapter: ExporterAdapter = module.Adapter(**dict(self.options))
        return adapter

    def unavailable(self) -> str | None:
        """None when the installed torch has this exporter, else why its cells are skipped."""
        return self.adapter().unavailable()

    def refuses(self, model: torch.nn.Module) -> str | None:
        """Why this exporter does not take `model` (its cell is skipped), or None."""
        return self.adapter().refuses(model)

    def sample(self) -> tuple[torch.nn.Module, Inputs] | None:
        """A small model this exporter takes, for warm-up and cold start (None: any)."""
        return self.adapter().sample()

    def export(self, request: ExportRequest) -> Exported:
        """The user's export call; a failure is a `StageFailure` naming its phase."""
        return self.adapter().export(request)

    def aten_ops(self, request: ExportRequest, exported: Exported) -> dict[str, int] | None:
        """ATen overloads (or TorchScript op names) in the graph the exporter started from."""
        return self.adapter().aten_ops(request, exported)

    def first_divergence(
        self, request: ExportRequest, exported: Exported, tolerance: tuple[float, float]
    ) -> Divergence:
        """Where a numerics mismatch starts (`ExporterAdapter.first_divergence`)."""
        return self.adapter().first_divergence(request, exported, tolerance)

    def mismatch_stage(
        self,
        request: ExportRequest,
        exported: Exported,
        reference: Reference,
        tolerance: tuple[float, float],
    ) -> MismatchStage:
        """Which stage changed the numbers of a mismatch (`ExporterAdapter.mismatch_stage`)."""
        return self.adapter().mismatch_stage(request, exported, reference, tolerance)

    def on_failure(self, request: ExportRequest, error: BaseException) -> FailureFacts:
        """What a failed export still tells: ATen ops, unsupported ops, the exporter's report."""
        return self.adapter().on_failure(request, error)


# The TorchScript exporter's range is torch.onnx._constants (ONNX_BASE_OPSET ..
# ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET); the dynamo exporter takes any ai.onnx opset but
# builds at 18 and converts (it silently keeps 18 where conversion is impossible, which
# `opset_actual` makes visible). tests/exporters/test_exporters.py checks them against torch.
REGISTRY: dict[str, Exporter] = {
    e.name: e
    for e in (
        Exporter(
            "dynamo",
            "torch.onnx.export(..., dynamo=True): torch.export, then ONNX translation",
            7,
            23,
            "harness.exporters.dynamo",
        ),
        Exporter(
            "torchscript",
            "torch.onnx.export(..., dynamo=False): tracing, then the TorchScript exporter",
            7,
            20,
            "harness.exporters.torchscript",
            (("scripted", False),),
        ),
        Exporter(
            "torchscript-script",
            "torch.jit.script, then torch.onnx.export(..., dynamo=False)",
            7,
            20,
            "harness.exporters.torchscript",
            (("scripted", True),),
        ),
        Exporter(
            "transformers",
            "transformers.exporters: OnnxExporter().export(model, inputs, OnnxConfig(...)),"
            " then save_pretrained (transformers' patches and fixes around the dynamo exporter)",
            18,
            23,
            "harness.exporters.hf",
        ),
        Exporter(
            "genai-builder",
            "onnxruntime-genai's model builder: save_pretrained, then python -m"
            " onnxruntime_genai.models.builder -i CHECKPOINT -o OUT -p PRECISION -e DEVICE"
            " (decoders that generate; its own opset)",
            7,
            23,
            "harness.exporters.genai_builder",
            in_process=False,
        ),
        Exporter(
            "mobius",
            "mobius (mobius-onnx): save_pretrained, then mobius build --config CHECKPOINT"
            " --ep DEVICE --dtype DTYPE --runtime ort-genai OUT (decoders that generate;"
            " its own opset)",
            7,
            23,
            "harness.exporters.mobius",
            in_process=False,
        ),
        Exporter(
            "dynamo-legacy",
            "torch.onnx.dynamo_export (torch 2.1-2.8)",
            18,
            18,
            "harness.exporters.dynamo_legacy",
        ),
    )
}
NAMES = tuple(REGISTRY)


def get(name: str) -> Exporter:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown exporter {name!r} (known: {', '.join(NAMES)})") from None
