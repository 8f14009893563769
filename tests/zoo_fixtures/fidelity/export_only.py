"""Models that behave differently only under `torch.onnx.is_in_onnx_export()`: a user's
direct export call runs these branches, so the harness's cells must too (issue 13)."""

from __future__ import annotations

import ctypes
import time

import torch

from harness.zoo import ModelSpec


class ExportOnly(torch.nn.Module):
    """Eager: a linear layer. Under export: `on_export` runs first (a crash, a hang, or a
    changed value)."""

    def __init__(self, on_export: str) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.on_export = on_export

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if torch.onnx.is_in_onnx_export():
            if self.on_export == "crash":
                ctypes.string_at(0)  # SIGSEGV, only while exporting
            elif self.on_export == "hang":
                time.sleep(3600)
            else:
                y = y * 2
        return y


SPECS = [
    ModelSpec(
        name=f"export_only_{what}",
        family="seed",
        build=lambda what=what: ExportOnly(what),
        example_inputs=lambda: (torch.rand(2, 4),),
        tags=("seed", "fidelity"),
    )
    for what in ("crash", "hang", "value")
]
