"""The record's smaller typed parts: where a numerics mismatch starts (`Divergence`), which
stage changed the numbers (`MismatchStage`), the runtime a cell was timed in (`OrtRuntime`),
where and at what cost it ran (`WorkerInfo`), a sampled cell's counts (`SampleSummary`) and
its minimal repro (`MinimalRepro`).

Each is an `Open` object: its known keys are typed fields, and keys a newer writer added
are kept in `extra` and written back, so a reader never crashes on them and never loses
them. In `records.jsonl` an `Open` object leaves out the keys whose value is None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

JsonObject = dict[str, Any]  # a JSON object as `json.loads` gives it
Reader = Callable[[Any], object]  # reads a JSON value into a typed part


def plain(value: object) -> object:
    """`value` as JSON holds it: typed parts as objects (their `to_dict`, else every
    field), tuples as lists."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Open:
    """A typed JSON object that keeps the keys it does not know in `extra`."""

    # keys a newer writer added: kept, and written back beside the others
    extra: JsonObject = field(default_factory=dict, kw_only=True)
    # How to read a field that is itself a typed part (or a list of them).
    _PARTS: ClassVar[Mapping[str, Reader]] = {}
    # Whether `to_dict` writes a None field as null (manifest.json) or leaves it out.
    WRITES_NULL: ClassVar[bool] = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in d.items() if k in names}
        extra = {k: v for k, v in d.items() if k not in names}
        return cls(**cls._typed(known), extra=extra)

    @classmethod
    def _typed(cls, known: JsonObject) -> JsonObject:
        """The known keys' values as the fields hold them (typed parts, tuples)."""
        for name, read in cls._PARTS.items():
            if known.get(name) is not None:
                known[name] = read(known[name])
        return known

    def to_dict(self) -> JsonObject:
        values = {
            f.name: plain(getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name != "extra" and (self.WRITES_NULL or getattr(self, f.name) is not None)
        }
        return {**values, **self.extra}

    def merged(self, facts: Mapping[str, object]) -> Self:
        """This object with `facts` (flat JSON keys) added or replaced."""
        return self.from_dict({**self.to_dict(), **facts})


def _tuple_of(part: type[Open]) -> Reader:
    return lambda items: tuple(part.from_dict(i) for i in items)


# -- numerics ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence(Open):
    """The first ONNX node over tolerance, or why none could be named (`reason`)."""

    node: str | None = None
    fx_node: str | None = None  # the program's node it came from (a repro ends there)
    op_type: str | None = None
    aten_op: str | None = None
    source: str | None = None
    output: str | None = None
    max_abs: float | None = None
    compared: int = 0  # intermediate values compared up to and including this node
    reason: str | None = None
    sample: int | None = None  # a sampled cell: the sample it was located in

    def text(self) -> str | None:
        """'node_shift (Add; aten harness_test.shift.default) at model.py:45 in forward,
        max_abs 1': where a numerics mismatch starts, or why no node is named."""
        if not self.node:
            return self.reason
        aten = self.aten_op and f"aten {self.aten_op}"
        what = "; ".join(s for s in (self.op_type, aten) if s)
        where = f" at {self.source}" if self.source else ""
        size = f", max_abs {self.max_abs:.3g}" if self.max_abs is not None else ""
        return f"{self.node} ({what}){where}{size}"


@dataclass(frozen=True)
class StageCheck(Open):
    """One stage's outputs against eager (capture, translation, optimization, runtime)."""

    stage: str | None = None
    compared: str | None = None
    ok: bool | None = None
    max_abs: float | None = None


@dataclass(frozen=True)
class MismatchStage(Open):
    """Which stage changed the numbers, each stage's check, and the optimizer step at
    fault (where it was the optimizer); `reason` where no stage could be named."""

    stage: str | None = None
    checks: tuple[StageCheck, ...] | None = None
    optimizer_step: JsonObject | None = None
    note: str | None = None
    reason: str | None = None

    _PARTS: ClassVar[Mapping[str, Reader]] = {"checks": _tuple_of(StageCheck)}


# -- where and how it ran -----------------------------------------------------------------------


@dataclass(frozen=True)
class OrtRuntime(Open):
    """The runtime a cell was timed in: equal on two cells with equal graph fingerprints,
    their latencies can differ only by noise."""

    onnxruntime: str | None = None
    providers: tuple[str, ...] | None = None
    session_options: JsonObject | None = None  # threads, graph optimization, spinning

    _PARTS: ClassVar[Mapping[str, Reader]] = {"providers": tuple}


@dataclass(frozen=True)
class ColdStart(Open):
    """The exporter's first export in a process (harness.cell.warmup)."""

    exporter: str | None = None
    opset: int | None = None
    seconds: float | None = None  # wall time
    cpu_seconds: float | None = None  # the process's CPU time
    peak_rss_mb: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class WorkerInfo(Open):
    """Where and at what cost a cell ran: the Ray worker (node, host, pid) and its clocks,
    the zygote it forked from (harness.cell.isolation) and the cell's own process."""

    node: str | None = None
    host: str | None = None
    pid: int | None = None  # the Ray worker's
    submitted_at: float | None = None  # wall clocks, seconds since the epoch
    started_at: float | None = None
    finished_at: float | None = None
    collected_at: float | None = None
    zygote_pid: int | None = None
    zygote_rss_mb: float | None = None
    prepare_s: float | None = None
    cell_pid: int | None = None
    fork_s: float | None = None
    exit_s: float | None = None
    cell_pss_mb: float | None = None
    cell_uss_mb: float | None = None
    cold_start: ColdStart | None = None

    _PARTS: ClassVar[Mapping[str, Reader]] = {"cold_start": ColdStart.from_dict}


# -- sampled cells ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleFailure(Open):
    index: int
    status: str
    stage: str | None = None
    error_signature: str | None = None
    unsupported_ops: tuple[str, ...] | None = None
    inputs: str | None = None
    tolerance: JsonObject | None = None

    _PARTS: ClassVar[Mapping[str, Reader]] = {"unsupported_ops": tuple}


@dataclass(frozen=True)
class SampleSkip(Open):
    index: int
    reason: str | None = None


@dataclass(frozen=True)
class SampleTolerance(Open):
    """The tolerance that judged the listed samples, and where it came from."""

    rtol: float
    atol: float
    source: str | None = None
    samples: tuple[int, ...] | None = None

    _PARTS: ClassVar[Mapping[str, Reader]] = {"samples": tuple}


@dataclass(frozen=True)
class SampleSummary(Open):
    """A sampled cell (harness.cell.samples): how many samples exported, matched, gave
    wrong numbers, failed or were skipped, and each failing and skipped sample."""

    total: int | None = None
    run: int | None = None
    exported: int | None = None
    matched: int | None = None
    wrong: int | None = None
    failed: int | None = None
    skipped: int | None = None
    view_dependent: int | None = None
    indices: tuple[int, ...] | None = None
    failures: tuple[SampleFailure, ...] | None = None
    skips: tuple[SampleSkip, ...] | None = None
    tolerances: tuple[SampleTolerance, ...] | None = None

    _PARTS: ClassVar[Mapping[str, Reader]] = {
        "indices": tuple,
        "failures": _tuple_of(SampleFailure),
        "skips": _tuple_of(SampleSkip),
        "tolerances": _tuple_of(SampleTolerance),
    }


# -- after the run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MinimalRepro(Open):
    """A minimal repro made after the run (harness.cell.repro): how, its node counts, and
    whether it reproduced in a fresh process; the script is in the record's `artifacts`."""

    kind: str | None = None  # export | check | ort_session | ort_run | numerics | capture
    method: str | None = None
    reproduces: bool | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    tests: int | None = None
    search_complete: bool | None = None
    seconds: float | None = None
    bound_s: float | None = None
    wall_s: float | None = None
    target: str | None = None
    imports: tuple[str, ...] | None = None
    reason: str | None = None
    verify: JsonObject | None = None

    _PARTS: ClassVar[Mapping[str, Reader]] = {"imports": tuple}
