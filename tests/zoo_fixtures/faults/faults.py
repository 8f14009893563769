"""Models that take the worker process down: a segfault and a hang (fault tests)."""

from __future__ import annotations

import ctypes
import time

import torch

from harness.zoo import ModelSpec


def _segfault() -> torch.nn.Module:
    ctypes.string_at(0)  # reads address 0: SIGSEGV in the worker process
    raise AssertionError("unreachable")


def _hang() -> torch.nn.Module:
    time.sleep(3600)
    raise AssertionError("unreachable")


SPECS = [
    ModelSpec(name="fault_segv", family="seed", build=_segfault, example_inputs=lambda: (torch.rand(2, 2),)),
    ModelSpec(name="fault_hang", family="seed", build=_hang, example_inputs=lambda: (torch.rand(2, 2),)),
    ModelSpec(
        name="fault_neighbour",
        family="seed",
        build=lambda: torch.nn.Linear(2, 2),
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
]
