"""Cells that leave files in the temp folder and never get to remove them: one hangs once
its graph is written (killed at its timeout, the harness's own working folder and graph
left), one writes a file there as a model's code may and is killed without last words."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import torch

from harness.zoo import ModelSpec


class _HangsOnceExported(torch.nn.Linear):
    """Runs while traced and before any graph exists; called again once a graph has been
    written under the temp folder (eager's side of the timed loop), it hangs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.jit.is_tracing() and any(Path(tempfile.gettempdir()).rglob("*.onnx")):
            time.sleep(3600)
        return super().forward(x)


def _writes_then_killed() -> torch.nn.Module:
    fd, _ = tempfile.mkstemp(prefix="model-download-")
    os.write(fd, b"\0" * 1_000_000)
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


SPECS = [
    ModelSpec(
        name="scratch_hang_after_export",
        family="seed",
        build=lambda: _HangsOnceExported(4, 4),
        example_inputs=lambda: (torch.rand(2, 4),),
    ),
    ModelSpec(
        name="scratch_killed_after_writing",
        family="seed",
        build=_writes_then_killed,
        example_inputs=lambda: (torch.rand(2, 4),),
    ),
]
