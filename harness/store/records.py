"""The typed records that flow through the pipeline: a `Cell` going in, a `Record` coming out.

Everything a run writes to `records.jsonl` is a `Record.to_json()`; everything a reader
gets back is `Record.from_json()`, which refuses a schema newer than this code knows and
migrates older ones with small `_update_to_N` functions.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Self

from harness.store.error_text import clean, normalize, root_cause, signature_of
from harness.store.protocol import Protocol
from harness.store.status import Stage, Status
from harness.store.validate import Malformed, check_record
from harness.store.validate import SchemaError as SchemaError  # raised by the readers

SCHEMA = 3

DEVICES = ("cpu", "cuda")


NO_PATCH = "none"  # the plain export call: no patch (harness.cell.patches)
CellKey = tuple[str, str, int, str, bool, str, str]  # Cell.key


@dataclass(frozen=True, order=True)
class Cell:
    """One (model, exporter, opset, device, dynamic, variant, patch) combination of the
    matrix; `patch` names the export-time patch the cell ran with (`none`: the plain call)."""

    model: str
    exporter: str
    opset: int
    device: str = "cpu"
    dynamic: bool = False
    variant: str = "base"
    family: str = field(default="", compare=False)
    patch: str = NO_PATCH

    @property
    def key(self) -> CellKey:
        c = self
        return (c.model, c.exporter, c.opset, c.device, c.dynamic, c.variant, c.patch)

    @property
    def cell_id(self) -> str:
        """A file-system safe name, unique within a run; names the artifacts folder."""
        shape = "dynamic" if self.dynamic else "static"
        patch = "" if self.patch == NO_PATCH else f"--patch-{self.patch}"
        return (
            f"{self.model}--{self.exporter}--op{self.opset}--{self.device}--{shape}--{self.variant}"
            + patch
        )

    def label(self) -> str:
        shape = " dynamic" if self.dynamic else ""
        variant = "" if self.variant == "base" else f" [{self.variant}]"
        patch = "" if self.patch == NO_PATCH else f" [patch {self.patch}]"
        return f"{self.model} {self.exporter}@{self.opset} {self.device}{shape}{variant}{patch}"


@dataclass(frozen=True)
class CellTask:
    """What a worker needs to run one cell: small, picklable, no tensors."""

    cell: Cell
    source: str
    run_id: str
    run_dir: str
    threads: int = 1
    keep_onnx: bool = False
    protocol: Protocol | None = None
    attempt: int = 1
    max_memory_gb: float | None = None
    # Seconds the cell may run (from the fork of its process); None: no limit.
    timeout_s: float | None = None
    # Modules the model requires (`ModelSpec.requires`): the worker's zygote imports them
    # once, before it forks the cell's process (harness.cell.isolation).
    requires: tuple[str, ...] = ()
    # Where an ok cell's graph is kept, content-addressed (harness/store/graphs.py); None: not kept.
    graph_store: str | None = None


@dataclass(frozen=True)
class Latency:
    """Raw latency samples in milliseconds and the statistics derived from them."""

    samples: tuple[float, ...]
    p50: float
    p90: float
    p99: float
    mean: float
    stdev: float
    n: int

    @classmethod
    def from_samples(cls, samples_ms: list[float] | tuple[float, ...]) -> Latency:
        from harness.stats import summarize

        s = summarize(samples_ms)
        return cls(tuple(samples_ms), s.p50, s.p90, s.p99, s.mean, s.stdev, s.n)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Latency | None:
        if d is None:
            return None
        return cls(
            samples=tuple(d.get("samples") or ()),
            p50=d["p50"],
            p90=d["p90"],
            p99=d["p99"],
            mean=d["mean"],
            stdev=d["stdev"],
            n=d["n"],
        )


@dataclass(frozen=True)
class ShapeLatency:
    """A cell timed at one named shape (a decode step, a prefill): the sizes of its dynamic
    dimensions, ORT's and eager's latency there, and eager p50 / ORT p50."""

    sizes: dict[str, int] | None
    ort_latency_ms: Latency
    eager_latency_ms: Latency
    speedup: float | None

    @classmethod
    def of(cls, sizes: dict[str, int] | None, ort_ms: list[float], eager_ms: list[float]) -> Self:
        ort, eager = Latency.from_samples(ort_ms), Latency.from_samples(eager_ms)
        return cls(sizes, ort, eager, eager.p50 / ort.p50 if ort.p50 > 0 else None)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ShapeLatency:
        load = Latency.from_dict
        ort, eager = load(d["ort_latency_ms"]), load(d["eager_latency_ms"])
        if ort is None or eager is None:
            raise ValueError("a shape's latency needs both ort_latency_ms and eager_latency_ms")
        return cls(d.get("sizes"), ort, eager, d.get("speedup"))


@dataclass(frozen=True)
class OutputCheck:
    """How one ONNX output compares with the eager reference."""

    name: str
    max_abs: float | None
    max_rel: float | None
    rmse: float | None
    rtol: float
    atol: float
    ok: bool
    note: str | None = None
    # Elements that fail the gate (integers: unequal; floats: beyond tolerance and eager's
    # noise, or NaN/inf where eager has none); None in records older than schema 2.
    mismatches: int | None = None


@dataclass
class Measurements:
    """What a cell measured so far; the worker fills it stage by stage.

    A failing stage keeps everything measured before it: a cell whose ORT run fails
    still reports its export time and memory.
    """

    opset_actual: int | None = None
    export_s: float | None = None
    export_phases: dict[str, float | None] | None = None
    export_peak_rss_mb: float | None = None
    export_peak_cuda_mb: float | None = None
    onnx_bytes: int | None = None
    onnx_nodes: int | None = None
    onnx_ops: dict[str, int] | None = None
    aten_ops: dict[str, int] | None = None
    unsupported_ops: list[str] | None = None
    numerics: list[OutputCheck] | None = None
    ort_session_s: float | None = None
    ort_latency_ms: Latency | None = None
    eager_latency_ms: Latency | None = None
    # On a numerics mismatch: the first ONNX node over tolerance, or why none is named.
    first_divergence: dict[str, Any] | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    # A sampled cell (harness.cell.samples): how many samples exported, matched, gave wrong
    # numbers, failed or were skipped, and each failing sample's stage and error.
    samples: dict[str, Any] | None = None
    # A canonical hash of the ONNX graph (harness/cell/fingerprint.py) and the runtime it
    # was timed in (onnxruntime version, providers, session options): equal on both sides,
    # the two cells ran the same computation, and latency can differ only by noise.
    graph_fingerprint: str | None = None
    ort_runtime: dict[str, Any] | None = None
    # On a numerics mismatch: which stage changed the numbers (capture, translation,
    # optimization, runtime), each stage's check, and the optimizer step at fault.
    mismatch_stage: dict[str, Any] | None = None
    # A dynamic cell timed at named shapes (the entry's `latency_shapes`: a decode step, a
    # prefill): each one's sizes and latencies; the first is also the record's latency.
    shape_latency: dict[str, ShapeLatency] | None = None


_MEASURED = [f.name for f in dataclasses.fields(Measurements)]


@dataclass(frozen=True)
class Record:
    """One cell's outcome: the line `records.jsonl` holds for it (contract fields)."""

    schema: int
    run_id: str
    model: str
    family: str
    exporter: str
    opset: int
    device: str
    dynamic: bool
    variant: str
    status: Status
    stage: Stage | None = None
    error_type: str | None = None
    error_message: str | None = None
    error_signature: str | None = None
    opset_actual: int | None = None
    export_s: float | None = None
    export_phases: dict[str, float | None] | None = None
    export_peak_rss_mb: float | None = None
    export_peak_cuda_mb: float | None = None
    onnx_bytes: int | None = None
    onnx_nodes: int | None = None
    onnx_ops: dict[str, int] | None = None
    aten_ops: dict[str, int] | None = None
    unsupported_ops: list[str] | None = None
    numerics: list[OutputCheck] | None = None
    ort_session_s: float | None = None
    ort_latency_ms: Latency | None = None
    eager_latency_ms: Latency | None = None
    speedup: float | None = None
    first_divergence: dict[str, Any] | None = None
    attempt: int = 1
    worker: dict[str, Any] | None = None
    duration_s: float | None = None
    artifacts: dict[str, str] = field(default_factory=dict)
    reason: str | None = None
    samples: dict[str, Any] | None = None  # a sampled cell's per-sample summary
    metadata: dict[str, Any] | None = None  # the zoo entry's metadata (e.g. opinfo, dtype)
    graph_fingerprint: str | None = None
    ort_runtime: dict[str, Any] | None = None
    mismatch_stage: dict[str, Any] | None = None
    # A minimal repro made after the run (harness.cell.repro): how, its node counts, and
    # whether it reproduced in a fresh process; the script is in `artifacts`.
    minimal_repro: dict[str, Any] | None = None
    shape_latency: dict[str, ShapeLatency] | None = None  # latency at named shapes
    patch: str = NO_PATCH  # the export-time patch the cell ran with (harness.cell.patches)

    def same_graph_as(self, other: Record) -> bool:
        """Both timed the same graph (equal fingerprints) in the same runtime."""
        return (
            self.graph_fingerprint is not None
            and self.graph_fingerprint == other.graph_fingerprint
            and self.ort_runtime is not None
            and self.ort_runtime == other.ort_runtime
        )

    def __post_init__(self) -> None:
        # Constructors and readers pass plain strings; the record holds the enums.
        object.__setattr__(self, "status", Status.of(self.status))
        if self.stage is not None:
            object.__setattr__(self, "stage", Stage(self.stage))

    # -- named constructors -------------------------------------------------------------

    @classmethod
    def finished(
        cls,
        cell: Cell,
        run_id: str,
        measured: Measurements,
        *,
        status: Status = Status.OK,
        stage: Stage | None = None,
        error: BaseException | None = None,
        reason: str | None = None,
        **extra: Any,
    ) -> Record:
        """A cell that ran in a worker: ok, or failed at `stage` with `error`."""
        values = {name: getattr(measured, name) for name in _MEASURED}
        speedup = None
        if (
            measured.ort_latency_ms
            and measured.eager_latency_ms
            and measured.ort_latency_ms.p50 > 0
        ):
            speedup = measured.eager_latency_ms.p50 / measured.ort_latency_ms.p50
        return cls(
            **_cell_fields(cell, run_id),
            status=status,
            stage=stage,
            **_error_fields(error),
            speedup=speedup,
            reason=reason,
            **values,
            **extra,
        )

    @classmethod
    def without_run(
        cls,
        cell: Cell,
        run_id: str,
        *,
        status: Status,
        reason: str,
        stage: Stage | None = None,
        **extra: Any,
    ) -> Record:
        """A cell that produced no measurements: skipped, not attempted, crashed, timed out, oom."""
        status = Status.of(status)
        signature = None if not status.ran else f"{status}: {normalize(reason)}"
        return cls(
            **_cell_fields(cell, run_id),
            status=status,
            stage=stage,
            error_message=None if status is Status.SKIPPED else reason,
            error_signature=signature,
            reason=reason,
            **extra,
        )

    # -- views ----------------------------------------------------------------------------

    @property
    def cell(self) -> Cell:
        return Cell(
            self.model,
            self.exporter,
            self.opset,
            self.device,
            self.dynamic,
            self.variant,
            self.family,
            self.patch,
        )

    @property
    def divergence_text(self) -> str | None:
        """'node_shift (Add; aten harness_test.shift.default) at model.py:45 in forward,
        max_abs 1': where a numerics mismatch starts, or why no node is named."""
        found = self.first_divergence
        if not found:
            return None
        if not found.get("node"):
            return found.get("reason")
        what = "; ".join(
            s
            for s in (found.get("op_type"), found.get("aten_op") and f"aten {found['aten_op']}")
            if s
        )
        where = f" at {found['source']}" if found.get("source") else ""
        size = f", max_abs {found['max_abs']:.3g}" if found.get("max_abs") is not None else ""
        return f"{found['node']} ({what}){where}{size}"

    @property
    def passed(self) -> bool:
        return self.status.passing

    def with_changes(self, **changes: Any) -> Record:
        return dataclasses.replace(self, **changes)

    # -- serialisation --------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=False, allow_nan=False, default=_json_default)

    @classmethod
    def from_dict(cls, d: Any) -> Record:
        """The record `d` holds, upgraded to `SCHEMA`; `Malformed` (a SchemaError) names the
        field of a value this harness never writes (harness.store.validate)."""
        _check_version(d)
        check_record(d)
        d = upgrade(dict(d))
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["numerics"] = (
            None if d.get("numerics") is None else [_output_check(o) for o in d["numerics"]]
        )
        values["ort_latency_ms"] = Latency.from_dict(d.get("ort_latency_ms"))
        values["eager_latency_ms"] = Latency.from_dict(d.get("eager_latency_ms"))
        values["artifacts"] = d.get("artifacts") or {}
        shapes = d.get("shape_latency")
        values["shape_latency"] = (
            None if shapes is None else {k: ShapeLatency.from_dict(v) for k, v in shapes.items()}
        )
        return cls(**values)

    @classmethod
    def from_json(cls, line: str) -> Record:
        return cls.from_dict(json.loads(line))


_CHECK_FIELDS = {f.name for f in dataclasses.fields(OutputCheck)}


def _output_check(d: dict[str, Any]) -> OutputCheck:
    return OutputCheck(**{k: v for k, v in d.items() if k in _CHECK_FIELDS})


def _cell_fields(cell: Cell, run_id: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "model": cell.model,
        "family": cell.family,
        "exporter": cell.exporter,
        "opset": cell.opset,
        "device": cell.device,
        "dynamic": cell.dynamic,
        "variant": cell.variant,
        "patch": cell.patch,
    }


def _error_fields(error: BaseException | None) -> dict[str, Any]:
    if error is None:
        return {"error_type": None, "error_message": None, "error_signature": None}
    message = clean(str(error)) or repr(error)
    root = root_cause(error)
    if root is not error:
        message += f"\nCaused by {type(root).__name__}: {clean(str(root))}"
    return {
        "error_type": type(error).__name__,
        "error_message": message[:4000],
        "error_signature": signature_of(error),
    }


def _json_default(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _check_version(d: Any) -> None:
    if not isinstance(d, dict):
        raise Malformed("", f"a record must be a JSON object, not {type(d).__name__}")
    version = d.get("schema")
    if not isinstance(version, int) or isinstance(version, bool):
        raise SchemaError("record has no integer 'schema' field")
    if version > SCHEMA:
        raise SchemaError(
            f"record schema {version} is newer than this harness understands ({SCHEMA}); "
            "upgrade the harness to read it"
        )


def upgrade(d: dict[str, Any]) -> dict[str, Any]:
    """Bring a record dict written by an older harness up to `SCHEMA`; refuse newer ones."""
    _check_version(d)
    if d["schema"] < 2:
        d = _update_to_2(d)
    if d["schema"] < 3:
        d = _update_to_3(d)
    return d


def _update_to_2(d: dict[str, Any]) -> dict[str, Any]:
    """Schema 1 kept an integer output's mismatch count in `max_abs` (an exact check,
    rtol = atol = 0); schema 2 has `mismatches` for it and every other output."""
    checks = []
    for o in d.get("numerics") or ():
        o = dict(o)
        if o.get("rtol") == 0.0 and o.get("atol") == 0.0 and o.get("max_abs") is not None:
            o["mismatches"], o["max_abs"] = int(o["max_abs"]), None
        checks.append(o)
    return {**d, "numerics": checks if d.get("numerics") is not None else None, "schema": 2}


def _update_to_3(d: dict[str, Any]) -> dict[str, Any]:
    """Schema 3 adds `mismatch_stage` and `minimal_repro`: unknown for older records."""
    return {**d, "mismatch_stage": None, "minimal_repro": None, "schema": 3}
