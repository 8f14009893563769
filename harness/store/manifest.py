"""The run's manifest (contract, docs/design.md: `manifest.json`): what ran, where, with what.

One frozen `Manifest` of typed parts, built in one place (`Manifest.begin`) once the
cluster is up, then replaced, never edited: `resumed` when `--resume` continues a run on a
new cluster, `finished_with` the dispatch figures at the end.

`to_dict` and `from_dict` map it to and from the JSON of `manifest.json`, keys and shapes
unchanged. A manifest read is untrusted input: `from_dict` checks it first
(harness.store.validate: `Malformed` names the field). Parts a harness of an older version
did not write read as null (or empty); keys a newer writer added are kept, in each part's
`extra`, and written back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar, Self, TypeAlias, TypeVar

from harness.store import environment
from harness.store.details import Open
from harness.store.records import SCHEMA
from harness.store.validate import check_manifest

JsonValue: TypeAlias = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
# A JSON object as read, before or after validation: its values are typed by the parts.
JsonObject: TypeAlias = Mapping[str, Any]
# A part's constructor arguments, from a checked JSON object.
Fields: TypeAlias = dict[str, Any]
# One variant's package versions as its workers saw them: "torch" -> "2.13.0", None where
# a package is not installed.
PackageVersions: TypeAlias = Mapping[str, str | None]


PartT = TypeVar("PartT", bound="Part")


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Part(Open):
    """A part of the manifest: its fields, then the keys a newer writer added (`extra`),
    every field written, None as null. `from_dict` trusts its input: `Manifest.from_dict`
    checks the whole manifest first."""

    WRITES_NULL: ClassVar[bool] = True


def _parts(part: type[PartT], values: list[JsonObject] | None) -> tuple[PartT, ...]:
    return tuple(part.from_dict(v) for v in values or ())


@dataclass(frozen=True)
class HarnessInfo(Part):
    """The harness that wrote the run."""

    version: str | None = None
    git_sha: str | None = None  # the checkout's commit, where the harness runs from one


@dataclass(frozen=True)
class Hardware(Part):
    """The driver's machine (harness.store.environment.hardware)."""

    cpu: str | None = None
    cores: int | None = None
    memory_gb: float | None = None
    gpus: tuple[str, ...] = ()
    machine: str | None = None
    system: str | None = None

    @classmethod
    def _typed(cls, known: Fields) -> Fields:
        return {**known, "gpus": tuple(known.get("gpus") or ())}


@dataclass(frozen=True)
class Settings(Part):
    """How the cells were run: what must match for two runs' numbers to be comparable
    (threads, protocol), and the limits every cell had."""

    threads: int | None = None
    timeout_s: float | None = None
    keep_onnx: bool | None = None
    graph_store: str | None = None  # the folder the kept graphs went to, if kept
    protocol: Mapping[str, float] = field(default_factory=dict)  # harness.plan.Protocol
    max_memory_gb: float | None = None


@dataclass(frozen=True)
class ZooProblem(Part):
    """A zoo file that failed to import: its models are missing from the matrix."""

    source: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Node(Part):
    """A node of the Ray cluster as Ray reported it (node-id resources left out)."""

    node_id: str | None = None
    host: str | None = None
    address: str | None = None
    alive: bool | None = None
    resources: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Cluster(Part):
    """The Ray cluster the run (or its last `--resume`) used."""

    address: str | None = None
    nodes: tuple[Node, ...] = ()
    resources: Mapping[str, float] = field(default_factory=dict)

    @classmethod
    def _typed(cls, known: Fields) -> Fields:
        return {**known, "nodes": _parts(Node, known.get("nodes"))}


@dataclass(frozen=True)
class DispatchSlots(Part):
    """How many cells the cluster ran at once, CPU cells and CUDA cells."""

    cpu: int | None = None
    gpu: int | None = None


@dataclass(frozen=True)
class DispatchSummary(Part):
    """The dispatch figures of a finished run (harness.dispatch.policy.DispatchStats)."""

    submitted: int | None = None
    completed: int | None = None
    retried: int | None = None
    max_in_flight: int | None = None
    peak_in_flight: int | None = None
    slots: DispatchSlots | None = None
    peak_in_flight_gpu: int | None = None
    not_attempted: int | None = None
    lost_nodes: tuple[str, ...] = ()
    node_settle_s_max: float | None = None  # the longest wait for a lost node's state
    driver_peak_rss_mb: float | None = None
    wall_s: float | None = None
    cells_per_minute: float | None = None

    @classmethod
    def _typed(cls, known: Fields) -> Fields:
        slots = known.get("slots")
        return {
            **known,
            "slots": None if slots is None else DispatchSlots.from_dict(slots),
            "lost_nodes": tuple(known.get("lost_nodes") or ()),
        }


@dataclass(frozen=True)
class ColdStart(Part):
    """One worker process's first export with one exporter (harness.cell.warmup): its
    wall and CPU time and peak memory, or the error that stopped it."""

    exporter: str
    opset: int | None = None
    seconds: float | None = None  # wall time
    cpu_seconds: float | None = None  # the process's CPU time: what runs are compared on
    peak_rss_mb: float | None = None
    error: str | None = None
    node: str | None = None
    pid: int | None = None  # the Ray worker's
    zygote_pid: int | None = None
    variant: str | None = None

    @property
    def variant_name(self) -> str:
        return self.variant or "base"


@dataclass(frozen=True)
class Manifest(Part):
    """What ran, where, with what: the run's `manifest.json`."""

    schema: int = SCHEMA  # the record schema of the harness that wrote it
    run_id: str | None = None
    started: str | None = None  # ISO 8601, UTC, to the second
    command: tuple[str, ...] = ()  # the command line, as typed
    suite: str | None = None
    harness: HarnessInfo | None = None
    # per variant: package -> version as its workers saw it, null where not installed
    versions: Mapping[str, PackageVersions] = field(default_factory=dict)
    hardware: Hardware | None = None
    settings: Settings | None = None
    matrix: str | None = None  # the announcement: "132 cells = 11 models x ..."
    cells: int | None = None
    # The `harness run` options, for --resume: harness.plan.RunOptions.to_dict(), which
    # owns their names and types (the store does not import the plan).
    options: Mapping[str, JsonValue] = field(default_factory=dict)
    zoo_problems: tuple[ZooProblem, ...] = ()
    cluster: Cluster | None = None
    finished: str | None = None  # null while the run is under way, or was killed
    dispatch: DispatchSummary | None = None
    # Per worker process, exporter and variant: the first export's time and memory.
    cold_start: tuple[ColdStart, ...] = ()

    @classmethod
    def begin(
        cls,
        *,
        run_id: str,
        command: list[str],
        suite: str | None,
        settings: Settings,
        matrix: str,
        cells: int,
        options: Mapping[str, JsonValue],
        zoo_problems: tuple[ZooProblem, ...],
        cluster: Cluster,
        versions: Mapping[str, PackageVersions],
    ) -> Manifest:
        """The manifest of a run about to dispatch its first cell."""
        return cls(
            run_id=run_id,
            started=now_iso(),
            command=tuple(command),
            suite=suite,
            harness=HarnessInfo.from_dict(environment.harness_info()),
            versions=versions,
            hardware=Hardware.from_dict(environment.hardware()),
            settings=settings,
            matrix=matrix,
            cells=cells,
            options=options,
            zoo_problems=zoo_problems,
            cluster=cluster,
        )

    def resumed(self, *, cluster: Cluster, versions: Mapping[str, PackageVersions]) -> Manifest:
        """The same run continued by `--resume`, possibly on another cluster."""
        return dataclasses.replace(self, cluster=cluster, versions=versions, finished=None)

    def finished_with(
        self, dispatch: DispatchSummary, cold_start: tuple[ColdStart, ...] = ()
    ) -> Manifest:
        return dataclasses.replace(
            self, finished=now_iso(), dispatch=dispatch, cold_start=self.cold_start + cold_start
        )

    @property
    def max_memory_gb(self) -> float | None:
        value = self.settings.max_memory_gb if self.settings else None
        return None if value is None else float(value)

    def variant_versions(self, variant: str = "base") -> PackageVersions:
        """One variant's package versions (empty where the manifest has none)."""
        return self.versions.get(variant) or {}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Self:
        """The manifest of `manifest.json`'s JSON; `Malformed` (a SchemaError) where it
        holds anything this harness would not have written."""
        check_manifest(d)
        return super().from_dict(d)

    @classmethod
    def _typed(cls, known: Fields) -> Fields:
        return {**known, **_typed_parts(known)}


def _typed_parts(known: JsonObject) -> Fields:
    def part(kind: type[Part], key: str) -> Part | None:
        value = known.get(key)
        return None if value is None else kind.from_dict(value)

    return {
        "command": tuple(known.get("command") or ()),
        "harness": part(HarnessInfo, "harness"),
        "versions": dict(known.get("versions") or {}),
        "hardware": part(Hardware, "hardware"),
        "settings": part(Settings, "settings"),
        "options": dict(known.get("options") or {}),
        "zoo_problems": _parts(ZooProblem, known.get("zoo_problems")),
        "cluster": part(Cluster, "cluster"),
        "dispatch": part(DispatchSummary, "dispatch"),
        "cold_start": _parts(ColdStart, known.get("cold_start")),
    }
