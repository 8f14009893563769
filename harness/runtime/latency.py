"""The latency stage: ORT and eager timed alternately, at the cell's shapes and the
protocol's thread counts, within the protocol's time budget, with the node to itself."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
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
from harness.cell.timing import time_calls, time_interleaved
from harness.store.axes import AXES
from harness.store.details import OrtRuntime
from harness.store.measures import Latency
from harness.store.protocol import Protocol
from harness.store.records import CellTask, Measurements, ShapeLatency

T = TypeVar("T")


def measure(
    runner: OrtRunner,
    model: torch.nn.Module,
    shapes: dict[str, tuple[dict[str, int] | None, Inputs]],
    protocol: Protocol,
    m: Measurements,
    share: EagerShare | None = None,
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
    BERT-base 16%; benchmarks/README.md). The checked session is dropped first. With a
    `share` (the protocol's share_eager), a loop whose eager samples another exporter's
    cell of the model wrote down on the node times ORT alone and takes them. With the
    protocol's `ort_from_pairs` (a paired CPU cell of one shape), ORT at the cell's threads
    is its exporter pair's to time (harness.pipeline.pairing): eager is timed alone there."""
    with stage("latency"):
        threads, example = runner.threads, next(iter(shapes.values()))[1]
        session = Session(runner.path, runner.device, replace(runner.optimisation, written_to=None))
        del runner.session
        gc.collect()
        others = [t for t in _thread_counts(protocol) if t != threads]
        budget = Budget(protocol, loops=len(shapes) - 1 + len(others))
        if protocol.ort_from_pairs and [sizes for sizes, _ in shapes.values()] == [None]:
            eager_ms, timed_by = _eager_alone(model, example, share, session, threads, protocol)
            m.eager = replace(m.eager, latency=Latency.from_samples(eager_ms), timed_by=timed_by)
        else:
            _loops(session, threads, model, shapes, protocol, budget, share, m)
        by_threads = {
            str(t): _at_threads(session, t, model, example, budget, share) for t in others
        }
        m.thread_latency = by_threads or None
        torch.set_num_threads(threads)


def _loops(
    session: Session,
    threads: int,
    model: torch.nn.Module,
    shapes: dict[str, tuple[dict[str, int] | None, Inputs]],
    protocol: Protocol,
    budget: Budget,
    share: EagerShare | None,
    m: Measurements,
) -> None:
    """ORT and eager at each shape, at the cell's threads: the record's own latencies."""
    timed = session.opened(threads)
    m.ort = replace(m.ort, runtime=OrtRuntime.from_dict(timed.runtime))
    loops = [
        partial(_timed, timed, model, sizes, inputs, share) for sizes, inputs in shapes.values()
    ]
    with node.timing(threads, session.device):
        # the record's own loop to the protocol's caps; the budget for the others
        results = [loops[0](protocol), *map(budget.loop, loops[1:])]
    by_shape = dict(zip(shapes, results, strict=True))
    del timed, loops  # the loops hold the session too: gone before the next one opens
    first = next(iter(by_shape.values()))
    m.ort = replace(m.ort, latency=first.ort_latency_ms)
    m.eager = replace(m.eager, latency=first.eager_latency_ms, timed_by=first.eager_from)
    m.shape_latency = {k: v for k, v in by_shape.items() if v.sizes is not None} or None


def _eager_alone(
    model: torch.nn.Module,
    inputs: Inputs,
    share: EagerShare | None,
    session: Session,
    threads: int,
    protocol: Protocol,
) -> tuple[list[float], str | None]:
    """Eager at the cell's threads where its ORT latency is its exporter pair's
    (`ort_from_pairs`): taken from `share` where another exporter's cell of the model timed
    it (waiting, holding no core, while one times it now), else timed here, to the
    protocol's caps, and written down; with the cell that timed it (None: this one)."""
    key = share.key(threads, inputs) if share else ""
    if share and (found := share.find(key)):
        return found
    if share and not share.claim(key) and (found := share.wait_for(key)):
        return found
    try:
        with node.timing(threads, session.device), torch.inference_mode():
            eager_ms = time_calls(_eager_call(model, inputs), protocol)
        if share:
            share.write(key, eager_ms)
    finally:
        if share:
            share.release(key)
    return eager_ms, None


def _timed(
    runner: OrtRunner,
    model: torch.nn.Module,
    sizes: dict[str, int] | None,
    inputs: Inputs,
    share: EagerShare | None,
    protocol: Protocol,
) -> ShapeLatency:
    """One loop, on the cores its phase holds: ORT and eager interleaved, or ORT alone where
    `share` has this loop's eager samples already, or another cell times them now."""
    call = runner.bind(inputs)
    key = share.key(runner.threads, inputs) if share else ""
    if share and (found := share.find(key)):
        return ShapeLatency.of(sizes, time_calls(call, protocol), *found)
    if share and not share.claim(key):  # another exporter's cell times this eager now
        ort_ms = time_calls(call, protocol)
        if found := share.wait_for(key):
            return ShapeLatency.of(sizes, ort_ms, *found)
    try:
        with torch.inference_mode():
            ort_ms, eager_ms = time_interleaved(call, _eager_call(model, inputs), protocol)
        if share:
            share.write(key, eager_ms)
    finally:
        if share:
            share.release(key)
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
    share: EagerShare | None,
) -> ShapeLatency:
    """ORT (a session of `threads` intra-op threads) and eager (torch at `threads`) at the
    example shape."""
    torch.set_num_threads(threads)
    runner = session.opened(threads)
    try:
        with node.timing(threads, session.device):
            return budget.loop(partial(_timed, runner, model, None, inputs, share))
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


# Where a node's cells write their eager samples down (harness.cell.node.folder), a file a
# run; one older than this is swept when a run begins its own.
SHARED_EAGER, SWEPT_AFTER_S = "eager", 2 * 24 * 3600
CLAIM_WRITTEN_S = 5.0  # a claim file still empty after this long was left by a dead process


class EagerShare:
    """Eager timed once per model (the protocol's share_eager): eager is the same model on
    the same inputs whichever exporter's graph ORT runs, and took two thirds of a real-size
    cell's latency loops, twice per model. The first cell of a run on a node to time a
    model at a shape and thread count writes its eager samples down in the node's folder;
    a cell of another exporter of the model (its other axes the same) that times there
    later takes them and times ORT alone, its record naming the cell that timed eager
    (`eager.timed_by`, a ShapeLatency's `eager_from`). Two cells of a model that reach the
    loop at once (each timing on a core of its own: harness.cell.node) do not both time
    it: the first claims it (a claim file holding its pid), the other times ORT alone and
    then waits for the samples, or times eager itself where the claimant died without
    them. The cells of a model on different nodes each time their own."""

    def __init__(self, task: CellTask) -> None:
        run = hashlib.sha256(f"{task.run_id}\0{task.run_dir}".encode()).hexdigest()[:16]
        self.path = node.folder() / SHARED_EAGER / f"{run}.jsonl"
        cell = task.cell
        self.model = [cell.model, *(a.json(v) for a, v in zip(AXES, cell.values, strict=True))]
        self.label = cell.label()

    @classmethod
    def of(cls, task: CellTask, protocol: Protocol) -> EagerShare | None:
        """The task's share where its protocol (the one it is timed by) asks for one."""
        return cls(task) if protocol.share_eager else None

    def key(self, threads: int, inputs: Inputs) -> str:
        shapes = [[list(t.shape), str(t.dtype), str(t.device)] for t in inputs.leaves()]
        return json.dumps([self.model, threads, shapes])

    def find(self, key: str) -> tuple[list[float], str] | None:
        """The eager samples a cell wrote down for `key`, and its label; None if none did."""
        with contextlib.suppress(FileNotFoundError):
            for line in self.path.read_text().splitlines():
                with contextlib.suppress(ValueError, KeyError, TypeError):  # a torn last line
                    entry = json.loads(line)
                    if entry["key"] == key and entry["eager_ms"]:
                        return [float(x) for x in entry["eager_ms"]], str(entry["timed_by"])
        return None

    def claim(self, key: str) -> bool:
        """Whether this process times `key`'s eager: none other claims it now (a claim
        whose process died is taken over)."""
        self._folder()
        claim = self._claim(key)
        for _ in range(2):
            try:
                fd = os.open(claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                if _claimant_alive(claim):
                    return False
                claim.unlink(missing_ok=True)
                continue
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            return True
        return False

    def release(self, key: str) -> None:
        """This process's claim on `key` given up (its samples written down, or not)."""
        claim = self._claim(key)
        with contextlib.suppress(OSError, ValueError):
            if int(claim.read_text()) == os.getpid():
                claim.unlink()

    def wait_for(self, key: str) -> tuple[list[float], str] | None:
        """The samples the cell claiming `key` writes down, once it has; None where it gave
        up its claim or died without them. The wait is the node's (harness.cell.node)."""
        claim = self._claim(key)
        with node.waiting():
            while (found := self.find(key)) is None and _claimant_alive(claim):
                time.sleep(node.POLL_S)
        return found or self.find(key)

    def _claim(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return self.path.with_name(f"{self.path.stem}-{digest}.claim")

    def _folder(self) -> None:
        """The node's folder of shares, swept as a run first writes to it."""
        if not self.path.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _sweep(self.path.parent)

    def write(self, key: str, eager_ms: list[float]) -> None:
        self._folder()
        entry = {"key": key, "eager_ms": eager_ms, "timed_by": self.label}
        with self.path.open("a") as out:
            out.write(json.dumps(entry) + "\n")


def _claimant_alive(claim: Path) -> bool:
    """Whether the process a claim file names still lives (an empty one is being written,
    for a moment: one that stays empty was left by a process that died writing it)."""
    try:
        text, age = claim.read_text(), time.time() - claim.stat().st_mtime
    except FileNotFoundError:
        return False
    return node.alive(int(text)) if text.isdigit() else age < CLAIM_WRITTEN_S


def _sweep(folder: Path) -> None:
    """Remove the files of runs that ended long ago."""
    stale = time.time() - SWEPT_AFTER_S
    for old in folder.iterdir():
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < stale:
                old.unlink()
