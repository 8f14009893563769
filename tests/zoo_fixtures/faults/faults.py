"""Models that take their process down: a segfault, a SIGKILL, a hang, an `os._exit`, a
`sys.exit` and a memory bomb (fault tests)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def _kill_worker() -> torch.nn.Module:
    """Kills the Ray worker that runs the cell (its process's grandparent: cell -> zygote ->
    worker), as something outside the cell would: the driver then sees the worker die."""
    zygote = Path(f"/proc/{os.getppid()}/stat").read_text()
    worker = int(zygote.rsplit(")", 1)[1].split()[1])  # the field after the state: its ppid
    if "ray::" not in Path(f"/proc/{worker}/cmdline").read_text(errors="replace"):
        raise RuntimeError("fault_kills_worker runs only under a Ray worker's zygote")
    os.kill(worker, signal.SIGKILL)
    return _hang()


def _exit_quietly() -> torch.nn.Module:
    """Leaves at once, without unwinding or last words (as a native library's abort path
    may)."""
    os._exit(0)


def _exit_politely() -> torch.nn.Module:
    sys.exit(3)


def _hang() -> torch.nn.Module:
    time.sleep(3600)
    raise AssertionError("unreachable")


# The command line of the process `fault_hang_with_child` leaves behind: tests look for it.
LEFT_BEHIND = ("sleep", "3599.5")


def _hang_with_child() -> torch.nn.Module:
    """Starts a process of its own (as a model's data loader or compiler might), then hangs."""
    subprocess.Popen(LEFT_BEHIND)
    return _hang()


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
        name="fault_hang_with_child",
        family="seed",
        build=_hang_with_child,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
    ModelSpec(
        name="fault_kills_worker",
        family="seed",
        build=_kill_worker,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
    ModelSpec(
        name="fault_exit",
        family="seed",
        build=_exit_quietly,
        example_inputs=lambda: (torch.rand(2, 2),),
    ),
    ModelSpec(
        name="fault_sysexit",
        family="seed",
        build=_exit_politely,
        example_inputs=lambda: (torch.rand(2, 2),),
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
    for _ in range(24):  # one block at a time, until one fails
        hoard.append(torch.ones(64 * 1024 * 1024))  # noqa: PERF401
    raise AssertionError(f"allocated {len(hoard) * 256} MiB without hitting the memory ceiling")


SPECS.append(
    ModelSpec(
        name="fault_oom",
        family="seed",
        build=_allocate_without_bound,
        example_inputs=lambda: (torch.rand(2, 2),),
    )
)
