"""Where a cell's graph changed, its ORT latency is judged on the two graphs timed again
together (harness/cell/paired.py), not on numbers the two runs took at different times:
which cells to re-measure, and the findings their paired verdicts make.

Slower (the confidence interval of the per-pair log-ratio wholly above +margin) blocks
when the estimate is at least `paired_block`, and warns below it. No absolute floor applies
here (`latency_abs_ms` guards separately-timed runs against timer and cache noise): the
two graphs ran alternately in one process, so that noise is in the interval already, and a
+10% change of a 0.1 ms model is as real as one of a 10 ms model; faster is an improvement; same is no finding; unknown after the bound
of pairs warns where its estimate is beyond +margin, else is info."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from harness.compare.findings import BLOCKING, IMPROVEMENT, INFO, WARNING, Finding
from harness.compare.metrics import NotCompared, beside_text
from harness.compare.thresholds import Thresholds
from harness.store.graphs import stored_model
from harness.store.paired import PairPlan, PairResult, PairTask
from harness.store.records import CellKey, Record
from harness.store.runs import Run

PAIRED_KINDS = frozenset({"paired_regressed", "paired_improved", "paired_unknown"})
METRIC = "ort_latency"


def _run_dir(run: Run) -> Path | None:
    return Path(run.path) if run.path else None


def changed_graph(b: Record, c: Record) -> bool:
    """Both ok with ORT latency, both fingerprinted, in one onnxruntime, graphs differ."""
    if not (b.passed and c.passed and b.ort.latency and c.ort.latency):
        return False
    if b.export.graph_fingerprint is None or c.export.graph_fingerprint is None:
        return False
    versions = [None if r.ort.runtime is None else r.ort.runtime.onnxruntime for r in (b, c)]
    same_ort = versions[0] == versions[1]
    return same_ort and b.export.graph_fingerprint != c.export.graph_fingerprint


def pair_tasks(
    base: Run, cand: Run, *, threads: int, plan: PairPlan | None = None
) -> tuple[list[PairTask], int]:
    """The cells whose graph changed and whose two graphs are both in a store: one task
    each; and how many changed cells lack a stored graph on either side."""
    b, c = base.by_cell(), cand.by_cell()
    tasks, missing = [], 0
    for key in sorted(b.keys() & c.keys()):
        if not changed_graph(b[key], c[key]):
            continue
        a_model = stored_model(_run_dir(base), b[key])
        b_model = stored_model(_run_dir(cand), c[key])
        if a_model is None or b_model is None:
            missing += 1
            continue
        tasks.append(
            PairTask(
                key, c[key].cell.label(), str(a_model), str(b_model), threads, plan or PairPlan()
            )
        )
    return tasks, missing


def paired_finding(r: PairResult, cand: Record, t: Thresholds) -> Finding | None:
    if r.error is not None or r.verdict == "same":
        return None
    ratio, low, high = math.exp(r.estimate), math.exp(r.low), math.exp(r.high)
    evidence = (
        f"{r.pairs} interleaved ABBA pairs in one process: x{ratio:.3f}"
        f" ({t.paired_confidence:.0%} CI x{low:.3f}..x{high:.3f}),"
        f" Wilcoxon p={'-' if r.p_value is None else f'{r.p_value:.2g}'};"
        f" band +-{t.paired_margin:.0%}, {r.seconds:g} s"
    ) + beside_text([("pair", r.timed_beside)])
    if r.verdict == "slower":
        kind = "paired_regressed"
        big = r.estimate >= math.log1p(t.paired_block)
        severity = BLOCKING if big else WARNING
        message = f"ORT latency worse: x{ratio:.2f}, timed together with the baseline's graph"
    elif r.verdict == "faster":
        kind, severity = "paired_improved", IMPROVEMENT
        message = f"ORT latency better: x{ratio:.2f}, timed together with the baseline's graph"
    else:  # unknown after the bound: a warning where it leans beyond the band
        leans = r.estimate > math.log1p(t.paired_margin)
        kind, severity = "paired_unknown", WARNING if leans else INFO
        message = f"ORT latency: graph changed, no verdict after {r.pairs} pairs (x{ratio:.2f})"
    return Finding(
        kind,
        severity,
        message,
        cell=cand.cell,
        metric=METRIC,
        baseline=round(float(_median(r.baseline_ms)), 6),
        candidate=round(float(_median(r.candidate_ms)), 6),
        ratio=ratio,
        threshold=1 + t.paired_block,
        evidence=evidence,
    )


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else math.nan


def apply_paired(
    found: Iterable[Finding],
    paired: Mapping[CellKey, PairResult],
    cand: Run,
    t: Thresholds,
    skipped: NotCompared,
) -> list[Finding]:
    """Replace the separately-timed ORT latency verdict of each re-measured cell with its
    paired one; a failed re-measurement leaves the separate verdict and is counted."""
    decided = {k for k, r in paired.items() if r.error is None}
    kept = [
        f
        for f in found
        if not (f.metric == METRIC and f.cell is not None and f.cell.key in decided)
        or f.kind == "run_shift"
    ]
    records = cand.by_cell()
    for key, r in sorted(paired.items()):
        if key not in records:
            continue
        if r.error is not None:
            skipped.add(f"{METRIC}: paired re-measurement failed")
        elif r.verdict == "same":
            skipped.add(f"{METRIC}: graph changed, same speed timed together")
        if f := paired_finding(r, records[key], t):
            kept.append(f)
    if f := paired_shift(list(paired.values()), t):
        kept.append(f)
    return kept


def paired_shift(results: Sequence[PairResult], t: Thresholds) -> Finding | None:
    """Most re-measured cells slower (or faster) together: a change that hits everything
    (a lost fusion in a common pattern, an opset change), reported as one finding too."""
    done = [r for r in results if r.error is None and r.pairs]
    if len(done) < t.min_series_for_shift:
        return None
    moved = [r for r in done if r.verdict in ("slower", "faster")]
    middle = sorted(r.estimate for r in done)[len(done) // 2]
    if len(moved) * 2 <= len(done) or abs(middle) <= math.log1p(t.paired_margin):
        return None
    return Finding(
        "run_shift",
        WARNING if middle > 0 else IMPROVEMENT,
        f"ORT latency moved x{math.exp(middle):.2f} across {len(done)} re-measured cells"
        f" ({len(moved)} of them beyond the band), each timed together with its baseline graph",
        metric=METRIC,
        ratio=math.exp(middle),
        threshold=1 + t.paired_margin,
        evidence="median of the cells' paired estimates",
    )
