"""ONNX Runtime sessions for a cell: the CPU provider with numpy feeds, or the CUDA provider
with I/O binding so that no host<->device copy happens inside the timed region."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
import onnxruntime as ort
import torch

from harness.cell.precision import BFLOAT16, to_numpy
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure, stage

# How a session's intra-op pool waits for work: ORT's default spins on after a call before
# its threads sleep ("on"); "in_calls" spins within a call and stops as it returns
# (`session.force_spinning_stop`): a timed session beside eager (whose cores an idle
# spinning pool would take) that still runs its calls as a user's session does.
Spinning = Literal["on", "in_calls"]

# ORT's graph optimisation levels the cells use, by the name a session's settings record.
LEVELS = {
    "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@dataclass(frozen=True)
class Optimisation:
    """How a session optimises the graph it loads: its level, the optimizers it leaves
    out (`disabled_optimizers`), and where it writes the optimised graph."""

    level: str = "all"
    disabled: tuple[str, ...] = ()
    written_to: Path | None = None


def session_settings(
    threads: int, *, spinning: Spinning = "on", level: str = "all"
) -> dict[str, int | str]:
    """The session options a cell is timed with, as recorded beside the graph fingerprint
    (`ort_runtime`): part of "the same runtime"."""
    settings: dict[str, int | str] = {
        "intra_op_num_threads": threads,
        "inter_op_num_threads": 1,
        "execution_mode": "sequential",
        "graph_optimization_level": level,
        "session.intra_op.allow_spinning": "1",
    }
    if spinning == "in_calls":
        settings["session.force_spinning_stop"] = "1"
    return settings


def runtime_of(
    providers: list[str], settings: dict[str, int | str]
) -> dict[str, str | list[str] | dict[str, int | str]]:
    return {"onnxruntime": ort.__version__, "providers": providers, "session_options": settings}


class OrtRunner:
    """A cell's ORT session. On CUDA, ORT computes float32 matrix products and convolutions
    in TF32 unless told not to (its `use_tf32` option, on by default; seen on the first GPU
    run: a float32 MLP 8.7e-5 off eager, whose own error was 2.6e-8): the session that
    checks numerics (`tf32=False`) judges the export in float32, the timed one runs as a
    user's session does, with ORT's defaults."""

    def __init__(
        self,
        path: Path,
        threads: int,
        device: str,
        *,
        spinning: Spinning = "on",
        tf32: bool = True,
        optimisation: Optimisation = Optimisation(),
    ) -> None:
        self.settings = session_settings(threads, spinning=spinning, level=optimisation.level)
        self.path, self.threads, self.optimisation = path, threads, optimisation
        options = session_options(self.settings, optimisation)
        providers: list[str | tuple[str, dict[str, str]]] = ["CPUExecutionProvider"]
        if device == "cuda":
            use_tf32 = "1" if tf32 else "0"
            self.settings["cuda.use_tf32"] = use_tf32
            providers.insert(0, ("CUDAExecutionProvider", {"use_tf32": use_tf32}))
        with stage("ort_session") as t:
            self.session = ort.InferenceSession(
                str(path), options, providers=providers, disabled_optimizers=optimisation.disabled
            )
            if device == "cuda":
                require_cuda_provider(self.session.get_providers())
        self.session_s = t.seconds
        self.device = device
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.runtime = runtime_of(self.session.get_providers(), self.settings)

    def order_outputs(self, names: Sequence[str]) -> None:
        """Give the outputs in the order of `names` where the graph has exactly those names
        (a model builder writes every layer's key before the values; the model returns
        them layer by layer), else in the graph's own order."""
        if sorted(names) == sorted(self.output_names):
            self.output_names = list(names)

    def _by_name(self, inputs: Inputs) -> dict[str, torch.Tensor]:
        """The exporters name graph inputs input_0..N in flattening order and may drop
        inputs the graph does not use."""
        by_name = dict(zip(inputs.names(), inputs.leaves(), strict=True))
        missing = [n for n in self.input_names if n not in by_name]
        if missing:
            raise StageFailure(
                "ort_run", KeyError(f"ONNX model asks for inputs {missing} the model does not have")
            )
        return {n: by_name[n] for n in self.input_names}

    def feeds(self, inputs: Inputs) -> dict[str, np.ndarray]:
        """The graph's inputs as numpy arrays, by name (what the graph store keeps)."""
        return {n: to_numpy(t) for n, t in self._by_name(inputs).items()}

    def input_types(self) -> dict[str, str]:
        """Each graph input's element type as ORT names it ('tensor(float16)')."""
        return {i.name: i.type for i in self.session.get_inputs()}

    def bind(self, inputs: Inputs) -> Callable[[], Any]:
        """A zero-argument call running the model on `inputs`, ready for a timing loop."""
        tensors = self._by_name(inputs)
        if self.device != "cuda" and any(t.dtype == torch.bfloat16 for t in tensors.values()):
            return self._bind_bfloat16(tensors)
        if self.device != "cuda":
            feeds = {n: to_numpy(t) for n, t in tensors.items()}
            return lambda: self.session.run(self.output_names, feeds)
        binding = self.session.io_binding()
        for name, t in tensors.items():
            t = t.detach().contiguous().to("cuda")
            tensors[name] = t  # keep the device buffer alive as long as the binding
            binding.bind_input(name, "cuda", 0, _numpy_dtype(t), list(t.shape), t.data_ptr())
        for name in self.output_names:
            binding.bind_output(name, "cuda", 0)

        def call() -> Any:
            self.session.run_with_iobinding(binding)
            torch.cuda.synchronize()
            return binding

        call.tensors = tensors  # type: ignore[attr-defined]
        return call

    def _bind_bfloat16(self, tensors: dict[str, torch.Tensor]) -> Callable[[], Any]:
        """numpy has no bfloat16 that ORT's Python binding takes: the feeds go in as
        OrtValues of ONNX's type, the outputs come back as OrtValues."""
        feeds = {n: _ort_value(t) for n, t in tensors.items()}
        return lambda: self.session.run_with_ort_values(self.output_names, feeds)

    def run(self, inputs: Inputs) -> list[np.ndarray]:
        call = self.bind(inputs)
        result = call()
        if self.device == "cuda":
            return list(result.copy_outputs_to_cpu())
        return [_from_ort_value(r) if isinstance(r, ort.OrtValue) else r for r in result]


def _ort_value(t: torch.Tensor) -> ort.OrtValue:
    a = to_numpy(t)
    if a.dtype != BFLOAT16:
        return ort.OrtValue.ortvalue_from_numpy(a)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
        a.view(np.uint16), onnx.TensorProto.BFLOAT16
    )


def _from_ort_value(value: ort.OrtValue) -> np.ndarray:
    """An output OrtValue as numpy (bfloat16 through DLPack, which numpy lacks)."""
    if value.data_type() != "tensor(bfloat16)":
        return np.asarray(value.numpy())
    return to_numpy(torch.utils.dlpack.from_dlpack(value._ortvalue.to_dlpack()))


def session_options(
    settings: dict[str, int | str], optimisation: Optimisation
) -> ort.SessionOptions:
    """ORT's options for a session with these `settings` (`session_settings`) and this
    optimisation."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(settings["intra_op_num_threads"])
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = LEVELS[optimisation.level]
    if optimisation.written_to is not None:
        options.optimized_model_filepath = str(optimisation.written_to)
        # its initializers in a file beside it: a graph past protobuf's 2 GB cannot be
        # written whole
        options.add_session_config_entry(
            "session.optimized_model_external_initializers_file_name",
            f"{optimisation.written_to.name}.data",
        )
    for key, value in settings.items():
        if key.startswith("session."):  # the session's config entries (spinning)
            options.add_session_config_entry(key, str(value))
    options.log_severity_level = 3
    return options


def _numpy_dtype(t: torch.Tensor) -> type[np.generic]:
    return torch.empty((), dtype=t.dtype).numpy().dtype.type


class CudaProviderMissing(RuntimeError):
    """A CUDA cell whose ORT session would run on the CPU: its latency would be a CPU run
    under a CUDA label, so the cell fails (`ort_load_failed`) instead."""


def cuda_provider_missing() -> str | None:
    """Why this onnxruntime cannot give a session the CUDA execution provider, if it
    cannot (a CPU-only build: the `cpu` extra, or onnxruntime beside onnxruntime-gpu)."""
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available:
        return None
    return (
        f"this onnxruntime ({ort.__version__}) has no CUDAExecutionProvider, only"
        f" {', '.join(available)}: install the `gpu` extra (onnxruntime-gpu) and not"
        " onnxruntime beside it"
    )


def require_cuda_provider(session_providers: list[str]) -> None:
    """ORT falls back to the CPU with only a logged warning where the CUDA provider does
    not load (CUDA or cuDNN libraries missing or mismatched): refuse that."""
    if "CUDAExecutionProvider" in session_providers:
        return
    why = cuda_provider_missing() or (
        "onnxruntime has the CUDAExecutionProvider but could not load it (its CUDA and cuDNN"
        " libraries must match the onnxruntime-gpu build)"
    )
    raise CudaProviderMissing(f"the ORT session got {session_providers}, not CUDA: {why}")


# ORT's nodes that copy a tensor between the host and a device: it adds one wherever the
# graph's producer and consumer run on different providers (the CUDA provider has no kernel
# for an op, or ORT keeps a shape computation on the host). Each is a synchronising copy in
# every call (a public 2026 report: 56 in a dynamo graph of ModernBERT-large, 3.4 times
# slower than the TorchScript graph on CUDA).
HOST_TRANSFERS = ("MemcpyFromHost", "MemcpyToHost")


def host_transfers(partitioned: Path) -> dict[str, int]:
    """The host<->device copy nodes in a session's graph as ORT wrote it once it placed its
    nodes on providers (`Optimisation.written_to`), by op type, in subgraphs too."""
    graph = onnx.load(str(partitioned), load_external_data=False).graph
    found = [n.op_type for n in _nodes(graph) if n.op_type in HOST_TRANSFERS]
    return {op: found.count(op) for op in HOST_TRANSFERS}


def _nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else attribute.graphs:
                yield from _nodes(subgraph)
