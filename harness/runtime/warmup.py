"""The per-process warm-up: one export of a model over the common ops, per exporter and
opset, before any measured export, so that one-time initialisation is not charged to the
first cell a worker runs."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import torch

from harness import exporters
from harness.cell.ort import OrtRunner
from harness.cell.shapes import Inputs
from harness.cell.timing import PeakRss
from harness.exporters.request import ExportRequest
from harness.store.details import ColdStart


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
# Set to 1, no cell's process warms its exporter up: the harness's own tests, whose runs
# check verdicts and records, not timings (a warm-up is an export per exporter and opset in
# every zygote). The cold start is still measured.
SKIP_ENV = "HARNESS_SKIP_WARM_UP"
# The exporter cold start is measured at one opset every exporter takes, so runs compare.
COLD_START_OPSET = 18


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
    its whole graph saying so) a trivial model does. Nothing to warm up for an exporter
    that is not installed (its cells are skipped with the reason) or that runs as a
    program of its own (a model builder: every build pays its own start, as a user's does)."""
    if not warms_up(exporter) or os.environ.get(SKIP_ENV) == "1":
        return
    if own := exporters.get(exporter).sample():
        _warm_up(exporter, opset, *own)
        return
    if opset >= WARM_UP_MODEL_MIN_OPSET:
        inputs = Inputs(WarmUpModel.example_inputs(), {}, ("image", "ids"))
        if _warm_up(exporter, opset, WarmUpModel().eval(), inputs):
            return
    _warm_up(exporter, opset, _TrivialModel().eval(), Inputs((torch.rand(2, 4),), {}, ("x",)))


def warms_up(exporter: str) -> bool:
    """Whether this process can warm `exporter` up: it runs in the process and the installed
    packages have it (else its sample may not even import: `--exporters transformers`
    without transformers once made every cell a harness error in the zygote)."""
    found = exporters.get(exporter)
    return found.in_process and found.unavailable() is None


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


class _ColdStarts:
    """This process's exporter cold starts: which exporters it measured, and the figures
    not yet handed to a record (the first record of that exporter carries it)."""

    measured: ClassVar[set[str]] = set()
    pending: ClassVar[dict[str, ColdStart]] = {}


def measure_cold_start(exporter: str) -> None:
    """Wall time, CPU time and peak RSS of this process's first export with `exporter` (a
    tiny MLP at opset 18), before any warm-up: what a fresh process pays for lazy imports
    and the exporter's initialisation (torch itself is already imported). Measured once per
    process and exporter; it is what regresses when the exporter's start-up regresses. The
    CPU time is the figure runs are compared on: other processes on a shared machine
    stretch the wall time (x2 with three busy loops on two cores), not the work done."""
    if exporter in _ColdStarts.measured:
        return
    _ColdStarts.measured.add(exporter)
    if not warms_up(exporter):
        return
    workdir = Path(tempfile.mkdtemp(prefix="harness-coldstart-"))
    model, inputs = exporters.get(exporter).sample() or (
        _TrivialModel().eval(),
        Inputs((torch.rand(2, 4),), {}, ("x",)),
    )
    request = ExportRequest(
        model=model,
        inputs=inputs,
        opset=COLD_START_OPSET,
        path=workdir / "cold.onnx",
        output_names=("output_0",),
    )
    figure = ColdStart(exporter=exporter, opset=COLD_START_OPSET)
    try:
        with PeakRss() as peak:
            start, cpu_start = time.perf_counter(), time.process_time()
            exporters.get(exporter).export(request)
            seconds = round(time.perf_counter() - start, 4)
            cpu_seconds = round(time.process_time() - cpu_start, 4)
        peak_mb = None if peak.peak_mb is None else round(peak.peak_mb, 1)
        figure = replace(figure, seconds=seconds, cpu_seconds=cpu_seconds, peak_rss_mb=peak_mb)
    except Exception as exc:  # the measured cells will meet and record the same problem
        figure = replace(figure, error=f"{type(exc).__name__}: {exc}"[:200])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _ColdStarts.pending[exporter] = figure


def take_cold_start(exporter: str) -> ColdStart | None:
    """The cold start this process measured for `exporter`, once (None after)."""
    return _ColdStarts.pending.pop(exporter, None)
