"""Models that take the worker process down: a segfault, a SIGKILL and a hang (fault
tests)."""

from __future__ import annotations

import ctypes
import os
import signal
import time

import torch

from harness.zoo import ModelSpec


def _segfault() -> torch.nn.Module:
    ctypes.string_at(0)  # reads address 0: SIGSEGV in the worker process
    raise AssertionError("unreachable")


def _killed() -> torch.nn.Module:
    """The worker dies without last words (as the kernel's OOM killer would kill it):
    no faulthandler log names a signal, so only its node's state says whose fault it is."""
    os.kill(os.getpid(), signal.SIGKILL)
    raise AssertionError("unreachable")


def _hang() -> torch.nn.Module:
    time.sleep(3600)
    raise AssertionError("unreachable")


SPECS = [
    ModelSpec(
        name="fault_segv",
        family="seed",
        build=_segfault,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
    ModelSpec(
        name="fault_killed",
        family="seed",
        build=_killed,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
    ModelSpec(
        name="fault_hang", family="seed", build=_hang, example_inputs=lambda: (torch.rand(2, 2),)
    ),
    ModelSpec(
        name="fault_neighbour",
        family="seed",
        build=lambda: torch.nn.Linear(2, 2),
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
]


def _allocate_without_bound() -> torch.nn.Module:
    """Allocates 256 MiB blocks until the allocation fails (capped at 6 GiB so that a
    broken memory ceiling fails the test instead of the machine)."""
    hoard = []
    for _ in range(24):
        hoard.append(torch.ones(64 * 1024 * 1024))
    raise AssertionError(f"allocated {len(hoard) * 256} MiB without hitting the memory ceiling")


SPECS.append(
    ModelSpec(
        name="fault_oom",
        family="seed",
        build=_allocate_without_bound,
        example_inputs=lambda: (torch.rand(2, 2),),
    )
)
