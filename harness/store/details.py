"""The record's smaller typed parts: where a numerics mismatch starts (`Divergence`), which
stage changed the numbers (`MismatchStage`), the runtime a cell was timed in (`OrtRuntime`),
where and at what cost it ran (`WorkerInfo`), a sampled cell's counts (`SampleSummary`) and
its minimal repro (`MinimalRepro`).

Each is an `Open` object: its known keys are typed fields, and keys a newer writer added
are kept in `extra` and written back, so a reader never crashes on them and never loses
them. In `records.jsonl` an `Open` object leaves out the keys whose value is None. Each is
declared once, here: pydantic derives its validator and its reader from its field types
(harness.store.declare).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Self

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema as cs

from harness.store.declare import Clock, Count, Error, MiB, Named, Ratio, Seconds, finite, read
from harness.store.status import Stage, Status

JsonObject = dict[str, Any]  # a JSON object as `json.loads` gives it
StatusName = Annotated[str, Named(Status)]  # a status's value, kept a plain string
StageName = Annotated[str, Named(Stage)]
Taken = Annotated[float, finite("s")]  # a step of the worker's, timed
WorkerMiB = Annotated[float, finite("MiB")]


def plain(value: object, *, nulls: bool | None = None) -> object:
    """`value` as JSON holds it: typed parts as objects (their `to_dict`, else every
    field), tuples as lists; `nulls` says whether an `Open` part writes its None fields."""
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, Open):
        return value.to_dict(nulls=nulls)
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, tuple | list):
        return [plain(v, nulls=nulls) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v, nulls=nulls) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Open:
    """A typed JSON object that keeps the keys it does not know in `extra`."""

    # keys a newer writer added: kept, and written back beside the others
    extra: JsonObject = field(default_factory=dict, kw_only=True)
    # Whether `to_dict` writes a None field as null (manifest.json) or leaves it out.
    WRITES_NULL: ClassVar[bool] = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """The part a JSON object holds: its known keys read into their fields' types
        (harness.store.declare: `Malformed` names a field of the wrong shape), the others
        kept in `extra`."""
        return read(cls, d)  # type: ignore[no-any-return]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        """Pydantic's schema of the dataclass, after the keys it does not know are moved
        into `extra`."""
        names = frozenset(f.name for f in dataclasses.fields(cls)) - {"extra"}

        def split(value: Any) -> Any:
            if not isinstance(value, dict) or value.keys() <= names:
                return value
            known = {k: v for k, v in value.items() if k in names}
            return {**known, "extra": {k: v for k, v in value.items() if k not in names}}

        return cs.no_info_before_validator_function(split, handler(source))

    def to_dict(self, *, nulls: bool | None = None) -> JsonObject:
        """The JSON object; None fields written as null where `nulls` (default: the
        class's `WRITES_NULL`, and the parts inside it as it does)."""
        nulls = self.WRITES_NULL if nulls is None else nulls
        values = {
            f.name: plain(getattr(self, f.name), nulls=nulls)
            for f in dataclasses.fields(self)
            if f.name != "extra" and (nulls or getattr(self, f.name) is not None)
        }
        return {**values, **self.extra}


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
    max_abs: Error | None = None
    compared: Count = 0  # intermediate values compared up to and including this node
    reason: str | None = None
    sample: Count | None = None  # a sampled cell: the sample it was located in

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
    max_abs: Error | None = None


@dataclass(frozen=True)
class MismatchStage(Open):
    """Which stage changed the numbers, each stage's check, and the optimizer step at
    fault (where it was the optimizer); `reason` where no stage could be named."""

    stage: str | None = None
    checks: tuple[StageCheck, ...] | None = None
    optimizer_step: JsonObject | None = None
    note: str | None = None
    reason: str | None = None


# -- where and how it ran -----------------------------------------------------------------------


@dataclass(frozen=True)
class OrtRuntime(Open):
    """The runtime a cell was timed in: equal on two cells with equal graph fingerprints,
    their latencies can differ only by noise."""

    onnxruntime: str | None = None
    providers: tuple[str, ...] | None = None
    session_options: JsonObject | None = None  # threads, graph optimization, spinning


@dataclass(frozen=True)
class ColdStart(Open):
    """One worker process's first export with one exporter (harness.runtime.warmup): its
    wall and CPU time and peak memory, or the error that stopped it. A record's `worker`
    holds its cell's process's; the manifest, every process's, with where it ran."""

    exporter: str | None = None  # required in the manifest's list (Manifest.cold_start)
    opset: Count | None = None
    seconds: Seconds | None = None  # wall time
    cpu_seconds: Seconds | None = None  # the process's CPU time: what runs are compared on
    peak_rss_mb: MiB | None = None
    error: str | None = None
    node: str | None = None  # in the manifest: the Ray node, worker and variant it ran in
    pid: Count | None = None  # the Ray worker's
    zygote_pid: Count | None = None
    variant: str | None = None

    @property
    def variant_name(self) -> str:
        return self.variant or "base"

    @property
    def exporter_name(self) -> str:
        """The exporter (every entry of the manifest's list names one)."""
        return self.exporter or ""


@dataclass(frozen=True)
class WorkerInfo(Open):
    """Where and at what cost a cell ran: the Ray worker (node, host, pid) and its clocks,
    the zygote it forked from (harness.runtime.zygote) and the cell's own process."""

    node: str | None = None
    host: str | None = None
    pid: int | None = None  # the Ray worker's
    submitted_at: Clock | None = None  # wall clocks, seconds since the epoch
    started_at: Clock | None = None
    finished_at: Clock | None = None
    collected_at: Clock | None = None
    zygote_pid: int | None = None
    zygote_rss_mb: WorkerMiB | None = None
    prepare_s: Taken | None = None
    cell_pid: int | None = None
    fork_s: Taken | None = None
    exit_s: Taken | None = None
    cell_pss_mb: WorkerMiB | None = None
    cell_uss_mb: WorkerMiB | None = None
    cold_start: ColdStart | None = None
    # The seconds the cell waited for its turn on the node: to start work while another
    # cell timed alone, to time (alone, or on a core of its own), to go back to work
    # (harness.cell.node)
    node_wait_s: Taken | None = None
    # What other cells did on the node ("label: phase") while the cell timed on cores of its
    # own (a 1-thread latency loop on a node of more cores: harness.cell.node)
    timed_beside: tuple[str, ...] | None = None

    def with_facts(self, facts: WorkerInfo) -> WorkerInfo:
        """This object with what `facts` knows (its fields that are set) added or replaced:
        each layer that learns where and at what cost a cell ran (the cell's process, its
        zygote, the Ray worker, the driver) says it as a WorkerInfo of its own."""
        known = {
            f.name: getattr(facts, f.name)
            for f in dataclasses.fields(facts)
            if f.name != "extra" and getattr(facts, f.name) is not None
        }
        return dataclasses.replace(self, **known, extra={**self.extra, **facts.extra})


# -- sampled cells ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SampleFailure(Open):
    index: int
    status: StatusName
    stage: StageName | None = None
    error_signature: str | None = None
    unsupported_ops: tuple[str, ...] | None = None
    inputs: str | None = None
    tolerance: JsonObject | None = None


@dataclass(frozen=True)
class SampleSkip(Open):
    index: int
    reason: str | None = None


@dataclass(frozen=True)
class SampleTolerance(Open):
    """The tolerance that judged the listed samples, and where it came from."""

    rtol: Error
    atol: Error
    source: str | None = None
    samples: tuple[int, ...] | None = None


@dataclass(frozen=True)
class SampleSummary(Open):
    """A sampled cell (harness.runtime.samples): how many samples exported, matched, gave
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


# -- after the run ------------------------------------------------------------------------------


# A graph this much slower than another exporter's is flagged (the report, `harness compare`).
SLOWER_THAN_FASTEST = 1.2


@dataclass(frozen=True)
class ExporterSpeed(Open):
    """A cell's graph speed against the fastest exporter's graph of the same model and
    axes (harness.pipeline.pairing): the two timed together in interleaved pairs, the
    ORT latency ratio (this one's over the fastest's; 1 for the fastest itself) with its
    95% interval and how many pairs, the pair's verdict; or why it could not be timed."""

    fastest: str | None = None  # the exporter whose graph was fastest
    ratio: Ratio | None = None
    ci_low: Ratio | None = None
    ci_high: Ratio | None = None
    pairs: int | None = None
    verdict: str | None = None  # slower | faster | same | unknown: the pair's, from this side
    error: str | None = None
    # the pair's own time (its Ray task: both sessions opened, warmed up, timed), on the
    # cell it was timed for; none on the fastest's, which no pair of its own timed
    seconds: Seconds | None = None
    # of those, the pair's waits for its turns on the node (to hold it, to time, to go
    # back to work)
    node_wait_s: Seconds | None = None
    # what other cells did on the node ("label: phase") while the pair timed on cores of its
    # own (harness.cell.node)
    timed_beside: tuple[str, ...] | None = None

    def slower(self, threshold: float = SLOWER_THAN_FASTEST) -> bool:
        """Slower than the fastest exporter's graph by `threshold` or more, and surely so
        (the interval's lower end past 1)."""
        ratio, low = self.ratio, self.ci_low
        return ratio is not None and low is not None and ratio >= threshold and low > 1.0


@dataclass(frozen=True)
class Workarounds:
    """Which of transformers' workarounds around torch.export and torch.onnx a cell of its
    exporter needs (harness.debt.search, `harness debt`): those the export used, and of them
    the ones tried (alone or in a group, harness.debt.search.settle), and of those the ones
    without which alone the cell fails (name -> the failure's signature); the others tried
    are no longer needed at this torch and onnxscript (obsolete for this model)."""

    used: tuple[str, ...]
    tried: tuple[str, ...]  # all of `used` unless the bound ran out or a few were asked
    needed: dict[str, str]
    seconds: Seconds
    bound_s: Seconds

    @property
    def obsolete(self) -> list[str]:
        """Tried, and the cell passes without them."""
        return [name for name in self.tried if name not in self.needed]

    @property
    def complete(self) -> bool:
        return set(self.tried) == set(self.used)

    def then(self, later: Workarounds) -> Workarounds:
        """What the record knows after a `later` search (of a few, `--workarounds`): its
        answers, and this one's for the workarounds it did not try again."""
        kept = {k: v for k, v in self.needed.items() if k not in later.tried}
        return Workarounds(
            later.used,
            tuple(sorted({*self.tried, *later.tried} & set(later.used))),
            {**kept, **later.needed},
            self.seconds + later.seconds,
            later.bound_s,
        )


@dataclass(frozen=True)
class MinimalRepro(Open):
    """A minimal repro made after the run (harness.repro): how, its node counts, and
    whether it reproduced in a fresh process; the script is in the record's `artifacts`."""

    kind: str | None = None  # export | check | ort_session | ort_run | numerics | capture
    method: str | None = None
    reproduces: bool | None = None
    nodes_before: int | None = None
    nodes_after: int | None = None
    tests: int | None = None
    search_complete: bool | None = None
    seconds: Seconds | None = None
    bound_s: Seconds | None = None
    wall_s: Seconds | None = None
    target: str | None = None
    imports: tuple[str, ...] | None = None
    reason: str | None = None
    verify: JsonObject | None = None
    # The module-level minimizer's (method "module"): the submodule kept, by its path in the
    # model ("model.layers.13.mlp"), its class, parameters and module tree depth before (the
    # model) and after, and the repeated items inside it replaced by identity.
    module: str | None = None
    module_class: str | None = None
    params_before: Count | None = None
    params_after: Count | None = None
    depth_before: Count | None = None
    depth_after: Count | None = None
    replaced: tuple[str, ...] | None = None
