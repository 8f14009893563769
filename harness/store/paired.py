"""Paired re-measurement, as data: what to time (a baseline and a candidate graph of one
cell, from the graph store) and what came back (the per-pair log-ratios, raw samples, the
verdict), small and picklable, for a Ray task and for `harness compare`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.store.records import CellKey


@dataclass(frozen=True)
class PairPlan:
    """How many pairs and how sure: blocks of ABBA/BAAB (randomised), judged every `round`
    pairs once `min_pairs` are in; "unknown" asks for more, up to `max_pairs` or `max_s`."""

    min_pairs: int = 30
    round: int = 30
    max_pairs: int = 300
    max_s: float = 20.0
    # each timed unit runs the model this long at least (several calls of a tiny model)
    unit_ms: float = 2.0
    warmup_s: float = 0.5
    confidence: float = 0.99
    # the band of "no practical difference": a change inside +-margin is "same"
    margin: float = 0.03
    seed: int = 0


@dataclass(frozen=True)
class PairTask:
    """One cell's two graphs, timed together in one process on the same reserved cores."""

    key: CellKey
    label: str
    baseline_model: str
    candidate_model: str  # "": the baseline timed alone (harness.cell.paired)
    threads: int = 1
    plan: PairPlan = field(default_factory=PairPlan)


@dataclass(frozen=True)
class PairResult:
    """Per-pair log(candidate / baseline) of interleaved timings, the raw per-call times
    (ms) of each side, the verdict ("slower", "faster", "same" or "unknown") with the
    estimate and confidence interval of the log-ratio; or the error that stopped it."""

    key: CellKey
    log_ratios: tuple[float, ...] = ()
    baseline_ms: tuple[float, ...] = ()
    candidate_ms: tuple[float, ...] = ()
    verdict: str = "unknown"
    estimate: float = 0.0
    low: float = 0.0
    high: float = 0.0
    p_value: float | None = None
    seconds: float = 0.0
    node_wait_s: float = 0.0  # of `seconds`, those spent waiting for its turn on the node
    # what other cells did on the node while the pair timed on cores of its own
    timed_beside: tuple[str, ...] = ()
    runtime: dict[str, Any] | None = None
    error: str | None = None

    @property
    def pairs(self) -> int:
        return len(self.log_ratios)
