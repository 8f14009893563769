"""A model whose Python code hoards bytes while it is exported (issue 34): under
`torch.export` its forward keeps 16 MiB blocks of bytes (to `HOARD_MIB` at most, so a
memory ceiling that does not hold fails the test instead of the machine), and the eager
reference run keeps nothing. Under a ceiling below the hoard, the export fails with a
MemoryError inside torch.export, which torch.onnx wraps in its TorchExportError: the
cell's verdict is `oom` (tests/cell/test_isolation.py; benchmarks/hoard_verdict.py
compares it with a direct call)."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec

BLOCK_MIB = 16
HOARD_MIB = 3072
HOARD: list[bytes] = []  # kept: the export goes on holding it


class Hoarder(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            while len(HOARD) < HOARD_MIB // BLOCK_MIB:
                HOARD.append(b"\x01" * (BLOCK_MIB << 20))
        return x + 1


SPECS = [
    ModelSpec(
        name="hoard_bytes",
        family="seed",
        build=Hoarder,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
]
