"""A model whose Python code hoards bytes while it is exported (issue 34): under
`torch.export` its forward keeps 16 MiB blocks of bytes (to `HOARD_MIB` at most, so a
memory ceiling that does not hold fails the test instead of the machine), and the eager
reference run keeps nothing. Under a ceiling below the hoard, the export fails with a
MemoryError inside torch.export, which torch.onnx wraps in its TorchExportError: the
cell's verdict is `oom` (tests/runtime/test_isolation.py; benchmarks/hoard_verdict.py
compares it with a direct call)."""

from __future__ import annotations

import ctypes
import time

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


def _hoard_to_the_ceiling() -> list[bytes]:
    """Blocks kept one at a time until an allocation fails: what is held then."""
    hoard: list[bytes] = []
    try:
        for _ in range(HOARD_MIB // BLOCK_MIB):
            hoard.append(b"\x01" * (BLOCK_MIB << 20))  # noqa: PERF401
    except MemoryError:
        return hoard
    raise AssertionError(f"hoarded {len(hoard) * BLOCK_MIB} MiB without meeting a ceiling")


def _hoard_then_crash() -> torch.nn.Module:
    """Hoards until an allocation fails, then dies of SIGSEGV, as CPython 3.11 does where
    `ContextVar.set` is the next to allocate (gh-151773; torch's config `__setattr__`
    calls it): a stand-in that does not depend on where the heap runs out."""
    # A real export runs a while before it runs out (the zygote samples its child's data
    # size every 0.25 s); without this the child could set its ceiling and die of it
    # before the first sample, where the verdict rests on the fork-time estimate alone.
    time.sleep(0.6)
    held = _hoard_to_the_ceiling()
    ctypes.string_at(0)  # reads address 0
    raise AssertionError(f"still alive, holding {len(held)} blocks")


def _hoard_then_exit() -> torch.nn.Module:
    """Hoards until an allocation fails, lets go, then ends its process: a stand-in for
    the TypeError CPython 3.11 raised out of every stage of a cell whose allocation had
    failed in torch's config logging (CI), after the cell's ceiling was lifted."""
    _hoard_to_the_ceiling()  # let go at once
    raise SystemExit("out of memory a while ago")


SPECS = [
    ModelSpec(
        name="hoard_bytes",
        family="seed",
        build=Hoarder,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
    ModelSpec(
        name="hoard_then_segv",
        family="seed",
        build=_hoard_then_crash,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
    ModelSpec(
        name="hoard_then_exit",
        family="seed",
        build=_hoard_then_exit,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
]
