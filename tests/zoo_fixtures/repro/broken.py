"""Deliberately broken models for minimal repros (issue 27): each failure sits deep inside
a model of many nodes, and its repro must be a few nodes that fail the same way in a
fresh process.

- `repro_wrong_constant`: a custom op deep inside whose ONNX translation adds 2 where
  eager adds 1 (a numerics mismatch made in translation);
- `repro_untranslated`: `aten.polygamma` (no ONNX translation in torch 2.13) in the middle
  of a graph of about 250 nodes (an export failure);
- `repro_checker_invalid`: a product over dim 0 of a 0-d tensor, which the exporter writes
  as a ReduceProd the ONNX checker rejects (axis out of range for rank 0);
- `repro_export_only`: an export-only branch (`torch.onnx.is_in_onnx_export()`) changes
  a constant deep inside, so the captured program itself differs from eager, and every
  ONNX node faithfully follows it (a numerics mismatch made at capture);
- `repro_capture_fails`: a Python branch on a tensor's value, which torch.export cannot
  capture (nothing to shrink: the repro falls back to the record's facts).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from harness.zoo import ModelSpec


def _load_shift_op() -> None:
    """The custom op lives in a plain module beside this file (importable by a script)."""
    name = "harness_repro_shift_op"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).parent / "_shift_op.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


_load_shift_op()


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.norm(torch.nn.functional.gelu(self.fc(x)))


class Deep(torch.nn.Module):
    """`depth` blocks; `broken` runs after block `at`."""

    def __init__(self, broken: str, depth: int = 24, at: int = 12, width: int = 16) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(width) for _ in range(depth))
        self.broken, self.at = broken, at

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i == self.at:
                x = self._break(x)
        return x

    def _break(self, x: torch.Tensor) -> torch.Tensor:
        if self.broken == "wrong_constant":
            return torch.ops.harness_repro.shift(x)
        if self.broken == "untranslated":
            return torch.special.polygamma(1, x.abs() + 1.0)
        if self.broken == "checker_invalid":
            return x * torch.prod(x.mean(), 0)
        if self.broken == "capture_fails":
            return x + 1.0 if x.sum() > 0 else x - 1.0
        if torch.onnx.is_in_onnx_export():  # export_only: a constant that export changes
            return x * 0.5
        return x * 0.25


def _spec(broken: str, depth: int) -> ModelSpec:
    return ModelSpec(
        name=f"repro_{broken}",
        family="seed",
        build=lambda: Deep(broken, depth=depth, at=depth // 2),
        example_inputs=lambda: (torch.rand(2, 16),),
        tags=("repro",),
    )


SPECS = [
    _spec("wrong_constant", 12),
    _spec("untranslated", 40),
    _spec("checker_invalid", 12),
    _spec("export_only", 12),
    _spec("capture_fails", 4),
]
