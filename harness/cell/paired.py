"""Paired, interleaved re-measurement of one cell's baseline and candidate graphs.

Both ONNX models are loaded in one process, on the cores the task reserved, their ORT
pools spinning within a call only (an idle session's spinning pool would take the cores
from the other one), and timed alternately in blocks of ABBA or BAAB (randomised), so
that the machine's drift (seen here: 12% within seconds) hits both sides of each pair
alike. Each block gives
one log-ratio, log((B1 + B2) / (A1 + A2)); the verdict comes from their confidence
interval, and "unknown" times more blocks, up to the plan's bound. Needs no torch: the
graph store keeps each graph's inputs."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from harness import stats
from harness.cell import node
from harness.cell.ort import OrtRunner
from harness.cell.timing import gc_paused
from harness.store.graphs import INPUTS
from harness.store.paired import PairPlan, PairResult, PairTask

# Calls before timing, at least (alternating: 2 each): a 1-2 s call (Llama-3.2-1B's,
# Whisper-small's) is warm after its first; 4 each took 15 s of the node alone.
WARM_CALLS = 4

# The runtime a graph was timed in (OrtRunner.runtime): version, providers, session options.
Runtime = dict[str, str | list[str] | dict[str, int | str]]


def time_pair(task: PairTask) -> PairResult:
    """Time the task's two graphs together (a task of one graph, `candidate_model` empty:
    that one alone); every failure is a result with its error. Both say what it took, and
    of that its waits for the node (to hold it, to time, to go back to work), a pair that
    failed after waiting too, and what other cells did on the node while it timed on cores
    of its own."""
    start, waits_before = time.perf_counter(), node.process_waited_s()
    beside_before = len(node.timed_beside())
    try:
        result = (_time_pair if task.candidate_model else _time_alone)(task)
    except Exception as exc:  # a graph that no longer loads is a result, not a crash
        result = PairResult(task.key, error=f"{type(exc).__name__}: {str(exc)[:300]}")
    seconds, waited = time.perf_counter() - start, node.process_waited_s() - waits_before
    beside = tuple(dict.fromkeys(node.timed_beside()[beside_before:]))
    return replace(
        result, seconds=round(seconds, 3), node_wait_s=round(waited, 3), timed_beside=beside
    )


def _session_call(model: str, threads: int) -> tuple[Callable[[], object], Runtime]:
    runner = OrtRunner(Path(model), threads, "cpu", spinning="in_calls")
    with np.load(Path(model).parent / INPUTS) as stored:
        feeds = {name: stored[name] for name in runner.input_names}
    return (lambda: runner.session.run(None, feeds)), runner.runtime


def _time_pair(task: PairTask) -> PairResult:
    plan = task.plan
    # the node held shared, as a cell holds it: the sessions open beside other cells' work
    # (two 4 GB graphs' took 30 s of the node alone), never beside their timing
    with node.holding(label=f"exporter pair {task.label}"):
        node.note_phase("sessions")
        call_a, runtime = _session_call(task.baseline_model, task.threads)
        call_b, _ = _session_call(task.candidate_model, task.threads)
        node.note_phase("timing")  # between them, a cell waiting to time alone goes first
        # timed on cores of its own, as a cell's latency is; collected before it takes them
        with gc_paused(), node.timing(task.threads):
            repeat = _calls_per_unit(call_a, call_b, plan)
            unit_a, unit_b = _unit(call_a, repeat), _unit(call_b, repeat)
            return _blocks(task, unit_a, unit_b, runtime)


def _time_alone(task: PairTask) -> PairResult:
    """One graph timed by itself, in units as a pair times each of its two (the model's
    other exporters failed: this one's record still gets its latency), until its median's
    95% interval is within the plan's margin, past the calls of each side of `min_pairs`
    pairs, or the plan's bounds."""
    plan = task.plan
    least, most = 2 * plan.min_pairs, 2 * plan.max_pairs  # a pair: each side twice
    with node.holding(label=f"exporter pair {task.label}"):
        node.note_phase("session")
        call, runtime = _session_call(task.baseline_model, task.threads)
        node.note_phase("timing")
        with gc_paused(), node.timing(task.threads):
            unit = _unit(call, _calls_per_unit(call, call, plan))
            samples: list[float] = []
            end = time.perf_counter() + plan.max_s
            while len(samples) < most and (len(samples) < least or time.perf_counter() < end):
                samples.append(unit())
                end += node.give_way()
                width = stats.interval_width(samples) if len(samples) >= least else None
                if width is not None and width <= plan.margin:
                    break
    return PairResult(task.key, baseline_ms=tuple(samples), runtime=runtime)


def _calls_per_unit(
    call_a: Callable[[], object], call_b: Callable[[], object], plan: PairPlan
) -> int:
    """Warm both up for `warmup_s`, alternating; then the calls a unit needs to last
    `unit_ms` (a 20 us model timed one call at a time is mostly timer and cache noise)."""
    times: list[float] = []
    end = time.perf_counter() + plan.warmup_s
    while time.perf_counter() < end or len(times) < WARM_CALLS:
        for call in (call_a, call_b):
            t0 = time.perf_counter()
            call()
            times.append((time.perf_counter() - t0) * 1000)
        end += node.give_way()
    per_call = max(1e-6, stats.median(times[len(times) // 2 :]))
    return max(1, math.ceil(plan.unit_ms / per_call))


def _unit(call: Callable[[], object], repeat: int) -> Callable[[], float]:
    def timed() -> float:
        t0 = time.perf_counter()
        for _ in range(repeat):
            call()
        return (time.perf_counter() - t0) * 1000 / repeat

    return timed


def _blocks(
    task: PairTask,
    unit_a: Callable[[], float],
    unit_b: Callable[[], float],
    runtime: Runtime,
) -> PairResult:
    plan = task.plan
    rng = random.Random(plan.seed)
    ratios: list[float] = []
    times_a: list[float] = []
    times_b: list[float] = []
    end = time.perf_counter() + plan.max_s
    verdict = stats.paired_verdict([], margin=plan.margin, confidence=plan.confidence)
    while len(ratios) < plan.max_pairs and time.perf_counter() < end:
        for _ in range(plan.round):
            if time.perf_counter() >= end and len(ratios) >= plan.min_pairs:
                break
            a, b = _block(unit_a, unit_b, abba=rng.random() < 0.5)
            end += node.give_way()  # a cell waiting to time alone goes first
            times_a += a
            times_b += b
            ratios.append(math.log(sum(b) / sum(a)))
        if len(ratios) >= plan.min_pairs:
            verdict = stats.paired_verdict(
                ratios, margin=plan.margin, confidence=plan.confidence, seed=plan.seed
            )
            if verdict.verdict != "unknown":
                break
    return PairResult(
        task.key,
        log_ratios=tuple(ratios),
        baseline_ms=tuple(times_a),
        candidate_ms=tuple(times_b),
        verdict=verdict.verdict,
        estimate=verdict.estimate,
        low=verdict.low,
        high=verdict.high,
        p_value=verdict.p_value,
        runtime=runtime,
    )


def _block(
    unit_a: Callable[[], float], unit_b: Callable[[], float], *, abba: bool
) -> tuple[list[float], list[float]]:
    """One ABBA (or BAAB) block: each side twice, symmetric in time."""
    if abba:
        a1, b1, b2, a2 = unit_a(), unit_b(), unit_b(), unit_a()
    else:
        b1, a1, a2, b2 = unit_b(), unit_a(), unit_a(), unit_b()
    return [a1, a2], [b1, b2]
