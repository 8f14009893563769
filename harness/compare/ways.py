"""Every way to an ONNX model, side by side, in a comparison (harness.store.ways): each
exporter's verdict counts and latency ratios in the baseline (the newest run) and in the
candidate, and the candidate's architectures way by way. Only where the candidate's
cells generate and two or more exporters ran the same architecture."""

from __future__ import annotations

from dataclasses import dataclass

from harness.compare.comparison import Comparison
from harness.store.records import Record
from harness.store.ways import (
    SHAPES,
    VERDICTS,
    Architecture,
    WaySummary,
    of_records,
    summary,
    verdict_of,
)


@dataclass(frozen=True)
class WaysSideBySide:
    baseline: dict[str, WaySummary]
    candidate: list[WaySummary]
    architectures: list[Architecture]

    def to_dict(self) -> dict[str, object]:
        return {
            "baseline": [_summary_dict(s) for s in self.baseline.values()],
            "candidate": [_summary_dict(s) for s in self.candidate],
            "architectures": [
                {
                    "architecture": a.name,
                    "ways": [
                        {
                            "exporter": w.exporter,
                            "status": w.facts.status.value,
                            **{v: verdict_of(w.facts, v) for v in VERDICTS},
                            "graph_bytes": w.facts.graph_bytes,
                            "nodes": w.facts.nodes,
                            "p50_ms": w.facts.p50_ms,
                            "ratio": w.ratio,
                        }
                        for w in a.ways
                    ],
                }
                for a in self.architectures
            ],
        }


def ways_side_by_side(c: Comparison) -> WaysSideBySide | None:
    after = _generative(list(c.candidate.by_cell().values()))
    if not after:
        return None
    before = _generative(list(c.baseline[-1].by_cell().values()))
    return WaysSideBySide({s.exporter: s for s in summary(before)}, summary(after), after)


def _generative(records: list[Record]) -> list[Architecture]:
    if not any(r.numerics.generation or r.numerics.components for r in records):
        return []
    return of_records(records)


def _summary_dict(s: WaySummary) -> dict[str, object]:
    return {
        "exporter": s.exporter,
        "architectures": s.architectures,
        "holds": s.holds,
        "checked": s.checked,
        "median_ratio": {k: s.median_ratio[k] for k in SHAPES if k in s.median_ratio},
    }
