"""Graph speed across exporters between two runs (each record's `exporter_speed`, timed in
pairs within its run: harness.pipeline.pairing): a cell whose graph became slower than
another exporter's graph of the same model warns, one that stopped being so is an
improvement. Within one run the pair is timed together, so the finding needs no noise
model of its own: the interval is in the record."""

from __future__ import annotations

from collections.abc import Mapping

from harness.compare.findings import IMPROVEMENT, WARNING, Finding, finding
from harness.store.details import ExporterSpeed
from harness.store.records import CellKey, Record


def _text(speed: ExporterSpeed | None) -> str | None:
    if speed is None or speed.ratio is None:
        return None
    return f"{speed.ratio:.2f}x of {speed.fastest} ({speed.ci_low}-{speed.ci_high})"


def _slower(r: Record | None) -> bool:
    return r is not None and r.exporter_speed is not None and r.exporter_speed.slower()


def exporter_speed_findings(
    baseline: Mapping[CellKey, Record], candidate: Mapping[CellKey, Record]
) -> list[Finding]:
    """A warning per candidate cell newly slower than its model's fastest exporter's graph;
    an improvement per cell no longer so."""
    found = []
    for key, c in sorted(candidate.items()):
        b = baseline.get(key)
        if _slower(c) and not _slower(b):
            speed = c.exporter_speed
            assert speed is not None
            message = (
                f"the {c.exporter} graph takes {_text(speed)} the time of the {speed.fastest}"
                " graph of the same model, timed in pairs"
            )
            found.append(finding("slower_than_exporter", WARNING, c, message,
                                 _text(b.exporter_speed if b else None), _text(speed)))  # fmt: skip
        elif _slower(b) and not _slower(c) and c.exporter_speed is not None:
            message = f"the {c.exporter} graph is no longer slower than another exporter's"
            found.append(finding("exporter_speed_fixed", IMPROVEMENT, c, message,
                                 _text(b.exporter_speed if b else None), _text(c.exporter_speed)))  # fmt: skip
    return found
