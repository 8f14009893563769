"""Every way to an ONNX model, side by side: for each architecture (a cell less its
exporter) that two or more exporters ran, each way's verdicts and figures (exported,
numerics, tokens single, batched and through onnxruntime_genai's Generator, graph bytes and
nodes, ORT p50 of a prefill and of a decode step) and its latency against the fastest way's
at the same shape; per exporter, how many architectures each verdict holds for. The report,
`harness compare` and the nightly site render the same rows (pure: no torch).

Latency ratios are of p50s each cell measured on its own (not paired); a way timed at
shapes of its own (transformers' exporter's components, timed on the kwargs it traced) shows
its figures without a ratio.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.store.measures import Generation, Latency
from harness.store.records import Cell, Record
from harness.store.status import Status

# The ways in the order a reader compares them: the tracing exporters, then the builders.
ORDER = ("dynamo", "transformers", "genai-builder", "mobius", "torchscript")
SHAPES = ("prefill", "decode_step")
COMPONENTS = {"prefill": "prefill", "decode_step": "decode"}  # transformers' components


@dataclass(frozen=True)
class WayFacts:
    """What the table shows of one cell."""

    cell: Cell
    status: Status
    exported: bool  # the export wrote a graph
    numerics: bool | None  # every output within tolerance (None: not compared)
    tokens: Generation | None
    batched: Generation | None
    genai: Generation | None
    graph_bytes: int | None
    nodes: int | None
    p50_ms: dict[str, float]  # by shape (prefill, decode_step)
    own_shapes: bool = False  # timed at the exporter's own shapes: no ratio

    @classmethod
    def of(cls, r: Record) -> WayFacts:
        more = r.numerics.generations or {}
        p50, own = _latencies(r)
        return cls(
            r.cell,
            r.status,
            r.export.seconds is not None,
            _numerics(r),
            r.numerics.generation,
            more.get("batched"),
            more.get("genai"),
            r.export.onnx_bytes,
            r.export.onnx_nodes,
            p50,
            own,
        )


@dataclass(frozen=True)
class Way:
    facts: WayFacts
    ratio: dict[str, float]  # p50 / the fastest way's p50, by shape

    @property
    def exporter(self) -> str:
        return self.facts.cell.exporter


@dataclass(frozen=True)
class Architecture:
    cell: Cell  # the cell less its exporter
    ways: tuple[Way, ...]

    @property
    def name(self) -> str:
        return self.cell.label().replace(" @", " ").replace("  ", " ")


def side_by_side(facts: Iterable[WayFacts]) -> list[Architecture]:
    """The architectures that two or more ways ran (skipped cells left out), sorted."""
    groups: dict[Cell, list[WayFacts]] = defaultdict(list)
    for f in facts:
        if f.status.applies:
            groups[f.cell.replace(exporter="")].append(f)
    found = []
    for key in sorted(groups):
        ways = sorted(groups[key], key=lambda f: _rank(f.cell.exporter))
        if len(ways) >= 2:
            found.append(Architecture(key, _with_ratios(ways)))
    return found


def of_records(records: Iterable[Record]) -> list[Architecture]:
    return side_by_side(WayFacts.of(r) for r in records)


def _rank(exporter: str) -> tuple[int, str]:
    return (ORDER.index(exporter) if exporter in ORDER else len(ORDER), exporter)


def _with_ratios(ways: Sequence[WayFacts]) -> tuple[Way, ...]:
    """Each way's p50 over the fastest's, at each shape two or more ways were timed at (a
    way timed alone has nothing to be compared with)."""
    fastest = {
        shape: min(times)
        for shape in SHAPES
        if len(times := [w.p50_ms[shape] for w in ways if shape in w.p50_ms and not w.own_shapes])
        >= 2
    }
    return tuple(
        Way(
            w,
            {}
            if w.own_shapes
            else {s: w.p50_ms[s] / fastest[s] for s in w.p50_ms if fastest.get(s)},
        )
        for w in ways
    )


def _numerics(r: Record) -> bool | None:
    checks = list(r.numerics.checks or [])
    for component in (r.numerics.components or {}).values():
        checks += component.checks
    return all(c.ok for c in checks) if checks else None


def _latencies(r: Record) -> tuple[dict[str, float], bool]:
    """p50 by shape: the entry's named shapes, else transformers' components (own shapes)."""
    named = {s: _p50(v.ort_latency_ms) for s, v in (r.shape_latency or {}).items() if s in SHAPES}
    found = {s: p for s, p in named.items() if p is not None}
    if found:
        return found, False
    parts = r.numerics.components or {}
    own = {s: _p50(parts[c].ort_latency_ms) for s, c in COMPONENTS.items() if c in parts}
    return {s: p for s, p in own.items() if p is not None}, True


def _p50(latency: Latency | None) -> float | None:
    return None if latency is None else latency.p50


# -- per exporter -----------------------------------------------------------------------------

VERDICTS = ("exported", "numerics", "tokens", "batched", "genai")
LABELS = {"genai": "Generator"}


def label(verdict: str) -> str:
    """A verdict's column header."""
    return LABELS.get(verdict, verdict)


@dataclass(frozen=True)
class WaySummary:
    """One exporter over the architectures: how many it ran, and for how many each verdict
    holds (`None` in `checked` where it was not checked), with its median latency ratios."""

    exporter: str
    architectures: int
    holds: dict[str, int]
    checked: dict[str, int]
    median_ratio: dict[str, float]


def summary(architectures: Sequence[Architecture]) -> list[WaySummary]:
    by_exporter: dict[str, list[Way]] = defaultdict(list)
    for a in architectures:
        for w in a.ways:
            by_exporter[w.exporter].append(w)
    return [_summary(e, by_exporter[e]) for e in sorted(by_exporter, key=_rank)]


def _summary(exporter: str, ways: Sequence[Way]) -> WaySummary:
    holds: dict[str, int] = {}
    checked: dict[str, int] = {}
    for verdict in VERDICTS:
        values = [v for w in ways if (v := verdict_of(w.facts, verdict)) is not None]
        holds[verdict], checked[verdict] = sum(values), len(values)
    ratios = {
        s: statistics.median(r) for s in SHAPES if (r := [w.ratio[s] for w in ways if s in w.ratio])
    }
    return WaySummary(exporter, len(ways), holds, checked, ratios)


def verdict_of(f: WayFacts, verdict: str) -> bool | None:
    """One verdict of a way: None where it was not reached or not checked."""
    if verdict == "exported":
        return f.exported
    if verdict == "numerics":
        return f.numerics
    generated = {"tokens": f.tokens, "batched": f.batched, "genai": f.genai}[verdict]
    return None if generated is None else generated.ok


def tokens_text(g: Generation | None) -> str:
    """'16/16', '3/16, first at 3', '5/16, tie at 5', 'error: ...', '-'."""
    if g is None:
        return "-"
    if g.error is not None:
        return f"error: {g.error[:80]}"
    agree = f"{g.agree}/{g.new_tokens}"
    if g.first_difference is None:
        return agree
    kind = "tie" if g.tie_gap is not None else "first"
    row = f" (row {g.row})" if g.row else ""
    return f"{agree}, {kind} at {g.first_difference}{row}"
