"""Which cells of a run get a minimal repro: pure, over records (no torch).

A cell that failed (or failed as expected: `xfail` keeps the stage and error of the
failure) at a stage a repro can show: an export phase, the checker, ONNX Runtime, or
numerics; a capture failure gets the record's facts instead. Failures with one error
signature form a cluster, as in the report; by default the first cell of each cluster
(in the report's order) stands for it.
"""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness import exporters
from harness.store.records import Record
from harness.store.status import Stage, Status

# The stages after the export a repro can show, in pipeline order (an export phase is "export").
AFTER_EXPORT = (Stage.CHECK, Stage.ORT_SESSION, Stage.ORT_RUN, Stage.NUMERICS)


def kind_of(record: Record) -> str | None:
    """What kind of repro the record's failure gets, or None (it passed, or failed where no
    repro applies: a timeout, a crash, a build error, the dynamic second shape, numbers an
    ORT optimizer changed: the record names that optimizer, the graph as exported passes;
    a model builder's graph, written from a checkpoint by a program of its own)."""
    if record.stage is None or record.ort.broken_by is not None:
        return None
    known = exporters.REGISTRY.get(record.exporter)
    if known is not None and not known.in_process:  # a builder's graph: no program to shrink
        return None
    # A clean failure has the status of its stage (a timeout or crash does not); an
    # expected one is xfail and keeps the stage.
    if record.status not in (record.stage.failure_status, Status.XFAIL):
        return None
    if record.stage is Stage.CAPTURE:
        return "capture"
    if record.stage.is_export:
        return "export"
    return str(record.stage) if record.stage in AFTER_EXPORT else None


@dataclass(frozen=True)
class Cluster:
    signature: str
    records: tuple[Record, ...]

    @property
    def first(self) -> Record:
        return self.records[0]


def clusters(records: Iterable[Record]) -> list[Cluster]:
    """Failures a repro applies to, grouped by error signature, largest group first; the
    cells of a group in the report's order."""
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in records:
        if kind_of(r) is not None:
            groups[r.error_signature or str(r.status)].append(r)
    found = [Cluster(sig, tuple(sorted(rs, key=lambda r: r.cell))) for sig, rs in groups.items()]
    return sorted(found, key=lambda c: (-len(c.records), c.signature))


def choose(
    records: Sequence[Record], *, cells: Sequence[str] = (), models: Sequence[str] = ()
) -> list[Record]:
    """The cells named (by their artifacts folder name), else every failing cell of the
    models matching a glob, else the first cell of each cluster."""
    if cells:
        wanted = set(cells)
        return [r for r in records if r.cell.cell_id in wanted and kind_of(r) is not None]
    if models:
        return [
            r
            for c in clusters(records)
            for r in c.records
            if any(fnmatch.fnmatchcase(r.model, g) for g in models)
        ]
    return [c.first for c in clusters(records)]
