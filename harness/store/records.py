"""The typed records that flow through the pipeline: a `Cell` going in, a `Record` coming out.

A `Record` is the cell, its outcome, and what it measured in typed groups
(harness.store.measures: export, ORT, eager, numerics; harness.store.details: worker,
samples, divergence, ...). Everything a run writes to `records.jsonl` is a
`Record.to_json()`, flat, under the contract's field names; everything a reader gets back
is `Record.from_json()`, which refuses a schema newer than this code knows, migrates
older ones with small `_update_to_N` functions, then validates and reads the line with
pydantic's validator of the declarations (`check_record`, harness.store.declare).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from typing import Any, NotRequired, Required

from typing_extensions import TypedDict

from harness.store.axes import AXES, LIST_AXES
from harness.store.axes import NO_PATCH as NO_PATCH
from harness.store.axes import Dtype as Dtype
from harness.store.axes import OrtOpt as OrtOpt
from harness.store.cell import Cell as Cell
from harness.store.cell import CellKey as CellKey
from harness.store.declare import Malformed, Positive, Ratio, Seconds, free, hints, read
from harness.store.declare import SchemaError as SchemaError  # raised by the readers
from harness.store.details import (
    JsonObject,
    MinimalRepro,
    SampleSummary,
    Workarounds,
    WorkerInfo,
    plain,
)
from harness.store.error_text import clean, normalize, root_cause, signature_of
from harness.store.measures import (
    EagerMeasures,
    ExportMeasures,
    Group,
    Numerics,
    OrtMeasures,
    speedup_of,
)
from harness.store.measures import Latency as Latency
from harness.store.measures import Measurements as Measurements
from harness.store.measures import OutputCheck as OutputCheck
from harness.store.measures import ShapeLatency as ShapeLatency
from harness.store.protocol import Protocol
from harness.store.status import Stage, Status

SCHEMA = 6

DEVICES = ("cpu", "cuda")


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
    # once, before it forks the cell's process (harness.runtime.zygote).
    requires: tuple[str, ...] = ()
    # Where an ok cell's graph is kept, content-addressed (harness/store/graphs.py); None: not kept.
    graph_store: str | None = None


@dataclass(frozen=True)
class Record:
    """One cell's outcome: the cell, how it ended, and what it measured, in typed groups.

    `records.jsonl` holds it flat, under the contract's field names (`export_s`,
    `ort_latency_ms`, ...): `to_dict` and `from_dict` map between the two."""

    cell: Cell
    run_id: str
    status: Status  # how the cell ended (harness.store.status)
    stage: Stage | None = None  # where it failed
    error_type: str | None = None
    error_message: str | None = None
    error_signature: str | None = None  # the message without numbers and paths: groups failures
    reason: str | None = None  # why a cell was skipped, retried or judged as it was
    export: ExportMeasures = ExportMeasures()
    ort: OrtMeasures = OrtMeasures()
    eager: EagerMeasures = EagerMeasures()
    numerics: Numerics = Numerics()
    shape_latency: dict[str, ShapeLatency] | None = None  # latency at named shapes
    samples: SampleSummary | None = None  # a sampled cell's per-sample summary
    attempt: Positive = 1  # 2 and up: retried after its worker died
    duration_s: Seconds | None = None  # the cell, start to end, as its worker timed it
    worker: WorkerInfo | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # name -> path in the run directory
    metadata: JsonObject | None = None  # the zoo entry's metadata (e.g. opinfo, dtype)
    minimal_repro: MinimalRepro | None = None  # harness.repro; the script: `artifacts`
    workarounds: Workarounds | None = None  # harness.debt.search (`harness debt`)

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
    ) -> Record:
        """A cell that ran in a worker: ok, or failed at `stage` with `error`."""
        m = measured
        return cls(
            cell,
            run_id,
            status,
            stage,
            *_error_fields(error),
            reason=reason,
            export=m.export,
            ort=m.ort,
            eager=m.eager,
            numerics=m.numerics,
            shape_latency=m.shape_latency,
            samples=m.samples,
            artifacts=dict(m.artifacts),
        )

    @classmethod
    def without_run(
        cls, cell: Cell, run_id: str, *, status: Status, reason: str, stage: Stage | None = None
    ) -> Record:
        """A cell that produced no measurements: skipped, not attempted, crashed, timed out, oom."""
        status = Status.of(status)
        signature = None if not status.ran else f"{status}: {normalize(reason)}"
        message = None if status is Status.SKIPPED else reason
        return cls(cell, run_id, status, stage, None, message, signature, reason)

    # -- views ----------------------------------------------------------------------------

    # The cell's parts, read often enough to read as the record's own.

    @property
    def model(self) -> str:
        return self.cell.model

    @property
    def family(self) -> str:
        return self.cell.family

    @property
    def exporter(self) -> str:
        return self.cell.exporter

    @property
    def opset(self) -> int:
        return self.cell.opset

    @property
    def device(self) -> str:
        return self.cell.device

    @property
    def dynamic(self) -> bool:
        return self.cell.dynamic

    @property
    def variant(self) -> str:
        return self.cell.variant

    @property
    def patch(self) -> str:
        return self.cell.patch

    @property
    def dtype(self) -> Dtype:
        return self.cell.dtype

    @property
    def ort_opt(self) -> OrtOpt:
        return self.cell.ort_opt

    @property
    def speedup(self) -> float | None:
        """Eager p50 / ORT p50 at the first timed shape."""
        return speedup_of(self.eager.latency, self.ort.latency)

    @property
    def divergence_text(self) -> str | None:
        found = self.numerics.first_divergence
        return None if found is None else found.text()

    def same_graph_as(self, other: Record) -> bool:
        """Both timed the same graph (equal fingerprints) in the same runtime."""
        return (
            self.export.graph_fingerprint is not None
            and self.export.graph_fingerprint == other.export.graph_fingerprint
            and self.ort.runtime is not None
            and self.ort.runtime == other.ort.runtime
        )

    @property
    def passed(self) -> bool:
        return self.status.passing

    def with_changes(self, **changes: Any) -> Record:
        return dataclasses.replace(self, **changes)

    def with_cell(self, **changes: Any) -> Record:
        """The record of the same outcome in a renamed cell (another variant, family)."""
        return dataclasses.replace(self, cell=self.cell.replace(**changes))

    # -- serialisation --------------------------------------------------------------------

    def to_dict(self) -> JsonObject:
        """The flat line of `records.jsonl` (the contract's field names and shapes)."""
        c, shapes = self.cell, self.shape_latency
        return {
            "schema": SCHEMA,
            "run_id": self.run_id,
            "model": c.model,
            "family": c.family,
            "exporter": c.exporter,
            **{a.name: a.json(c[a]) for a in _CORE_AXES},
            "status": self.status.value,
            "stage": None if self.stage is None else self.stage.value,
            "error_type": self.error_type,
            "error_message": self.error_message,
            "error_signature": self.error_signature,
            **self.export.to_flat(),
            **self.ort.to_flat(),
            **self.eager.to_flat(),
            "speedup": self.speedup,
            **self.numerics.to_flat(),
            "attempt": self.attempt,
            "worker": plain(self.worker),
            "duration_s": self.duration_s,
            "artifacts": self.artifacts,
            "reason": self.reason,
            "samples": plain(self.samples),
            "metadata": self.metadata,
            "minimal_repro": plain(self.minimal_repro),
            "workarounds": plain(self.workarounds),
            "shape_latency": None
            if shapes is None
            else {k: v.to_dict() for k, v in shapes.items()},
            **{a.name: a.json(c[a]) for a in LIST_AXES},
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls, d: Any) -> Record:
        """The record `d` holds, upgraded to `SCHEMA`, then checked: `Malformed` (a
        SchemaError) names the field of a value this harness never writes."""
        _check_version(d)
        v = _read_line(upgrade(dict(d)))
        axes = {a.name: v[a.name] for a in AXES if v.get(a.name) is not None}
        cell = Cell(v["model"], v["exporter"], family=v["family"], **axes)
        groups: dict[str, Any] = {
            name: group(**{attr: v.get(key) for key, attr in group.FLAT.items()})
            for name, group in _GROUPS.items()
        }
        own = {name: v[name] for name in _OWN if v.get(name) is not None}
        return cls(cell, v["run_id"], **own, **groups)

    @classmethod
    def from_json(cls, line: str) -> Record:
        return cls.from_dict(json.loads(line))


# The axes every record names (a line without one is malformed); the list axes come last
# in a line, and a line without one reads as its default.
_CORE_AXES = tuple(a for a in AXES if a not in LIST_AXES)
_CELL_KEYS = ("model", "family", "exporter", *(a.name for a in _CORE_AXES))
# The fields of the record that are groups of flat keys (harness.store.measures).
_GROUPS: dict[str, type[Group]] = {
    "export": ExportMeasures,
    "ort": OrtMeasures,
    "eager": EagerMeasures,
    "numerics": Numerics,
}
# The line's keys that are no field of the record: written, never read back as such.
_DERIVED = {"schema": Positive, "speedup": Ratio | None}
# What a line needs: its schema, its run, its outcome and its whole cell.
RECORD_REQUIRED = ("schema", "run_id", *_CELL_KEYS, "status")


# The record's own fields (not its cell's, not its groups'), read from their keys.
_OWN = tuple(
    f.name for f in dataclasses.fields(Record) if f.name not in ("cell", "run_id", *_GROUPS)
)


@functools.cache
def _line_type() -> type:
    """A `records.jsonl` line as a TypedDict that pydantic validates: the cell's fields, the
    record's own, and each group's under its flat key, with their declared types."""
    record = hints(Record)
    declared: dict[str, Any] = dict(_DERIVED)
    declared |= {"model": str, "family": str, "exporter": str}
    declared |= {a.name: a.kind for a in AXES}
    declared |= {name: record[name] for name in ("run_id", *_OWN)}
    for group in _GROUPS.values():
        found = hints(group)
        declared |= {key: found[name] for key, name in group.FLAT.items()}
    # in the order the line is written: of two wrong values, the first is named
    written = Record(Cell("m", "e", 1), "r", Status.OK).to_dict()
    keys = {key: declared[key] for key in sorted(declared, key=list(written).index)}
    marked = {k: Required[h] if k in RECORD_REQUIRED else NotRequired[h] for k, h in keys.items()}
    return TypedDict("Line", marked)  # type: ignore[operator, no-any-return]


def _read_line(d: JsonObject) -> JsonObject:
    """The line's values read into their types; the keys no declaration knows (a newer
    writer's) only need finite numbers."""
    line = _line_type()
    values: JsonObject = read(line, d)
    known = line.__annotations__
    for key in [k for k in d if k not in known]:
        free(d[key], key)
    return values


def check_record(d: object) -> None:
    """Raise `Malformed` unless `d` is a record line this harness could have written."""
    _read_line(d)  # type: ignore[arg-type]


def _error_fields(error: BaseException | None) -> tuple[str | None, str | None, str | None]:
    """The error's type, message (with its root cause) and signature."""
    if error is None:
        return None, None, None
    message = clean(str(error)) or repr(error)
    root = root_cause(error)
    if root is not error:
        message += f"\nCaused by {type(root).__name__}: {clean(str(root))}"
    return type(error).__name__, message[:4000], signature_of(error)


def _check_version(d: object) -> None:
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


def upgrade(d: JsonObject) -> JsonObject:
    """Bring a record dict written by an older harness up to `SCHEMA`; refuse newer ones."""
    _check_version(d)
    if d["schema"] < 2:
        d = _update_to_2(d)
    if d["schema"] < 3:
        d = _update_to_3(d)
    if d["schema"] < 4:
        d = _update_to_4(d)
    if d["schema"] < 5:
        d = _update_to_5(d)
    if d["schema"] < 6:
        d = {**d, **dict.fromkeys(("components", "generation", "workarounds")), "schema": 6}
    return d


def _update_to_2(d: JsonObject) -> JsonObject:
    """Schema 1 kept an integer output's mismatch count in `max_abs` (an exact check,
    rtol = atol = 0); schema 2 has `mismatches` for it and every other output."""
    given = d.get("numerics")
    if not isinstance(given, list):  # null, or a value the check after the upgrade names
        return {**d, "schema": 2}
    checks = []
    for o in given:
        exact = isinstance(o, dict) and o.get("rtol") == 0.0 and o.get("atol") == 0.0
        if exact and isinstance(o.get("max_abs"), int | float):
            o = {**o, "mismatches": int(o["max_abs"]), "max_abs": None}
        checks.append(o)
    return {**d, "numerics": checks, "schema": 2}


def _update_to_3(d: JsonObject) -> JsonObject:
    """Schema 3 adds `mismatch_stage` and `minimal_repro`: unknown for older records."""
    return {**d, "mismatch_stage": None, "minimal_repro": None, "schema": 3}


# Fields older writers may lack, at their meaning there.
_SINCE_4: JsonObject = {
    "attempt": 1,
    "artifacts": {},
    "patch": NO_PATCH,
    **dict.fromkeys(("reason", "samples", "metadata", "graph_fingerprint", "ort_runtime")),
    **dict.fromkeys(("first_divergence", "shape_latency", "worker", "duration_s")),
}


def _update_to_4(d: JsonObject) -> JsonObject:
    """Schema 4 is the typed record: every field present, `speedup` derived from the two
    latencies (never stored apart from them), and `worker`, `samples`, `first_divergence`,
    `mismatch_stage`, `minimal_repro` and `ort_runtime` typed objects that leave out their
    null keys. Older records get the defaults of the fields they lack."""
    return {**_SINCE_4, **d, "schema": 4}


def _update_to_5(d: JsonObject) -> JsonObject:
    """Schema 5 adds the dtype axis (every older cell ran in float32), a reduced-precision
    cell's `precision_loss` (none before), and the ORT optimisation axis (every older cell
    ran in a default session) with its fused ops, optimizers and culprit."""
    return {**_SINCE_5, **d, "schema": 5}


_SINCE_5: JsonObject = {
    "dtype": Dtype.FLOAT32.value,
    "ort_opt": OrtOpt.DEFAULT.value,
    **dict.fromkeys(("precision_loss", "ort_fused_ops", "ort_optimizers", "ort_broken_by")),
}
