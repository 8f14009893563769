"""The latency stage: ORT and eager timed alternately, at the cell's shapes and the
protocol's thread counts, within the protocol's time budget, with the node to itself."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

import torch

from harness.cell import node
from harness.cell.ort import Optimisation, OrtRunner
from harness.cell.shapes import Inputs
from harness.cell.stages import stage
from harness.cell.timing import time_interleaved
from harness.store.details import OrtRuntime
from harness.store.protocol import Protocol
from harness.store.records import Measurements, ShapeLatency

T = TypeVar("T")


def measure(
    runner: OrtRunner,
    model: torch.nn.Module,
    shapes: dict[str, tuple[dict[str, int] | None, Inputs]],
    protocol: Protocol,
    m: Measurements,
) -> None:
    """ORT and eager timed alternately in one loop, so that `speedup` cancels the machine's
    drift, at each shape in turn, then at the protocol's other thread counts; the first
    shape's figures are the record's latencies, named shapes are also kept by name
    (`shape_latency`), other thread counts by their count (`thread_latency`). The first
    shape's loop at the cell's threads (the record's latencies, its speedup) is held to
    the protocol's own caps; the others share its budget (with every loop in one 12-s
    budget, Qwen3-0.6B's p50 came from 4 calls, 1.44 times a plain script's). The loops run
    with the node to themselves (harness.cell.node); their
    sessions are opened before, beside other cells' work (a 4 GB graph's took 15-20 s that
    the node spent alone with one core idle). Their ORT pools spin within a call, as a
    user's session's do, and stop as it returns: one spinning on while eager runs would
    take its cores (docs/design.md: latency in a clean state), and one that never spins
    wakes its threads for every parallel loop of a call (Qwen3-0.6B 12-19% slower,
    BERT-base 16%; benchmarks/README.md). The checked session is dropped first."""
    with stage("latency"):
        threads, example = runner.threads, next(iter(shapes.values()))[1]
        session = Session(runner.path, runner.device, replace(runner.optimisation, written_to=None))
        del runner.session
        gc.collect()
        others = [t for t in _thread_counts(protocol) if t != threads]
        budget = Budget(protocol, loops=len(shapes) - 1 + len(others))
        timed = session.opened(threads)
        m.ort = replace(m.ort, runtime=OrtRuntime.from_dict(timed.runtime))
        loops = [partial(_timed, timed, model, sizes, inputs) for sizes, inputs in shapes.values()]
        with node.alone():
            # the record's own loop to the protocol's caps; the budget for the others
            results = [loops[0](protocol), *map(budget.loop, loops[1:])]
        by_shape = dict(zip(shapes, results, strict=True))
        del timed, loops  # the loops hold the session too: gone before the next one opens
        first = next(iter(by_shape.values()))
        m.ort = replace(m.ort, latency=first.ort_latency_ms)
        m.eager = replace(m.eager, latency=first.eager_latency_ms)
        m.shape_latency = {k: v for k, v in by_shape.items() if v.sizes is not None} or None
        by_threads = {str(t): _at_threads(session, t, model, example, budget) for t in others}
        m.thread_latency = by_threads or None
        torch.set_num_threads(threads)


def _timed(
    runner: OrtRunner,
    model: torch.nn.Module,
    sizes: dict[str, int] | None,
    inputs: Inputs,
    protocol: Protocol,
) -> ShapeLatency:
    call, eager = runner.bind(inputs), _eager_call(model, inputs)
    with torch.inference_mode():
        ort_ms, eager_ms = time_interleaved(call, eager, protocol)
    return ShapeLatency.of(sizes, ort_ms, eager_ms)


@dataclass(frozen=True)
class Session:
    """How the cell's timed sessions are made, at every thread count."""

    path: Path
    device: str
    optimisation: Optimisation

    def opened(self, threads: int) -> OrtRunner:
        return OrtRunner(
            self.path, threads, self.device, spinning="in_calls", optimisation=self.optimisation
        )


def _at_threads(
    session: Session,
    threads: int,
    model: torch.nn.Module,
    inputs: Inputs,
    budget: Budget,
) -> ShapeLatency:
    """ORT (a session of `threads` intra-op threads) and eager (torch at `threads`) at the
    example shape."""
    torch.set_num_threads(threads)
    runner = session.opened(threads)
    try:
        with node.alone():
            return budget.loop(partial(_timed, runner, model, None, inputs))
    finally:
        del runner


def _thread_counts(protocol: Protocol) -> list[int]:
    """The protocol's other thread counts, 0 read as every core of the node."""
    cores = os.cpu_count() or 1
    return list(dict.fromkeys(t or cores for t in protocol.latency_threads))


class Budget:
    """The protocol's `budget_s` shared among a cell's latency loops but the record's own
    (its other shapes and thread counts): each loop may take what is left over the loops
    still to come (both of its sides: half each), and never more than the protocol's own
    `max_time_s`. Only the loops' own time (their warm-ups included) is spent: opening a
    session between them is not (a 4 GB graph's took half of a 20 s budget, and
    Gemma-3-1B's p50 came from one call)."""

    def __init__(self, protocol: Protocol, *, loops: int) -> None:
        self.protocol, self.left, self.spent = protocol, loops, 0.0

    def loop(self, timed: Callable[[Protocol], T]) -> T:
        """`timed` at its share of the budget; what it took is spent."""
        self.left = max(1, self.left)
        protocol = self.protocol
        if protocol.budget_s:
            share = max(0.0, protocol.budget_s - self.spent) / self.left / 2
            protocol = replace(protocol, max_time_s=min(protocol.max_time_s, share))
        self.left -= 1
        start = time.perf_counter()
        try:
            return timed(protocol)
        finally:
            self.spent += time.perf_counter() - start


def _eager_call(model: torch.nn.Module, inputs: Inputs) -> Callable[[], object]:
    if not next(iter(inputs.leaves()), torch.empty(0)).is_cuda:
        return lambda: inputs.call(model)

    def call_and_wait() -> object:
        out = inputs.call(model)
        torch.cuda.synchronize()
        return out

    return call_and_wait
