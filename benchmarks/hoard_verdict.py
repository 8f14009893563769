"""The verdict on a model that hoards bytes while it is exported (issue 34), three ways:
a direct dynamo call under the memory ceiling the harness sets (soft RLIMIT_DATA = VmData
now + GB, as `harness.runtime.limits.memory_limit` does), in a fresh process (`fresh`) or
in a child forked from a parent that already exported once (`fork`), and the harness's
own cell process, forked from its zygote (`harness`, `run_cell_isolated`).

    python benchmarks/hoard_verdict.py {fresh,fork,harness} [--gb 1.5] [--model FILE:NAME]
        [--after-faults]

Prints one JSON object: how the process ended (`exit`: ok, raised, or the signal that
killed it), the exception chain of a direct call, and the verdict (`oom` where the chain
holds an allocation failure, by `limits.is_out_of_memory`; the record's status for the
harness). Run one at a time: each may take the ceiling's worth of memory.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.runtime.limits import is_out_of_memory

HOARD = Path(__file__).resolve().parents[1] / "tests" / "zoo_fixtures" / "hoard" / "hoard.py"
# What one run writes (its ONNX files, its run directory), removed when it ends.
SCRATCH = tempfile.TemporaryDirectory(prefix="hoard-")


def _vm_data() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmData:"):
            return int(line.split()[1]) * 1024
    return 0


def _model(source: Path, name: str) -> tuple[Any, tuple[Any, ...]]:
    from harness.zoo.discovery import load_source

    spec = next(s for s in load_source(str(source)) if s.name == name)
    return spec.build(), tuple(spec.example_inputs())


def direct(gb: float, source: Path, name: str) -> dict[str, Any]:
    """One `torch.onnx.export(..., dynamo=True)` under the ceiling, in this process."""
    import torch

    model, args = _model(source, name)
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, (_vm_data() + int(gb * 1024**3), hard))
    path = Path(SCRATCH.name) / "model.onnx"
    try:
        torch.onnx.export(model, args, str(path), opset_version=18, dynamo=True)
    except Exception as exc:
        chain, cause = [], exc
        while cause is not None:
            chain.append(
                f"{type(cause).__name__}: {str(cause).splitlines()[0][:60] if str(cause) else ''}"
            )
            cause = cause.__cause__ or cause.__context__
        verdict = "oom" if is_out_of_memory(exc) else "export_failed"
        return {"exit": "raised", "chain": chain, "verdict": verdict}
    return {"exit": "ok", "verdict": "ok"}


def forked(gb: float, source: Path, name: str) -> dict[str, Any]:
    """`direct` in a child forked from this process, once it has exported a small model."""
    import torch

    warm = Path(SCRATCH.name) / "warm.onnx"
    torch.onnx.export(torch.nn.Linear(2, 2), (torch.rand(1, 2),), str(warm), dynamo=True)
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            os.write(write_fd, json.dumps(direct(gb, source, name)).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    sent = b""
    while chunk := os.read(read_fd, 1 << 16):
        sent += chunk
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return {"exit": signal.Signals(os.WTERMSIG(status)).name, "verdict": "crashed"}
    return json.loads(sent) if sent else {"exit": "no result", "verdict": "crashed"}


FAULTS = HOARD.parents[1] / "faults" / "faults.py"
FAULT_CELLS = (
    "fault_segv",
    "fault_killed",
    "fault_exit",
    "fault_sysexit",
    "fault_oom",
    "fault_hang",
)


def harness(gb: float, source: Path, name: str, *, after_faults: bool = False) -> dict[str, Any]:
    from harness.runtime.zygote import run_cell_isolated
    from harness.store.records import Cell, CellTask

    run_dir = Path(SCRATCH.name) / "run"
    run_dir.mkdir()
    for fault in FAULT_CELLS if after_faults else ():
        cell = Cell(fault, "torchscript", 18)
        run_cell_isolated(
            CellTask(cell, str(FAULTS), "r", str(run_dir), timeout_s=4, max_memory_gb=1)
        )
    task = CellTask(Cell(name, "dynamo", 18), str(source), "r", str(run_dir), max_memory_gb=gb)
    record = run_cell_isolated(task)
    return {
        "exit": "record",
        "verdict": str(record.status),
        "stage": record.stage and str(record.stage),
        "signature": record.error_signature,
        "message": (record.error_message or "")[:300],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("how", choices=("fresh", "fork", "harness"))
    parser.add_argument("--gb", type=float, default=1.5)
    parser.add_argument("--model", default=f"{HOARD}:hoard_bytes")
    parser.add_argument("--after-faults", action="store_true")
    args = parser.parse_args()
    source, name = args.model.rsplit(":", 1)
    if args.how == "harness":
        found = harness(args.gb, Path(source), name, after_faults=args.after_faults)
    else:
        found = {"fresh": direct, "fork": forked}[args.how](args.gb, Path(source), name)
    print(json.dumps({"how": args.how, "gb": args.gb, **found}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
