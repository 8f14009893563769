"""The run's manifest (contract, docs/design.md: `manifest.json`): what ran, where, with what.

One frozen `Manifest` of typed parts, built in one place (`Manifest.begin`) once the
cluster is up, then replaced, never edited: `resumed` when `--resume` continues a run on a
new cluster, `finished_with` the dispatch figures at the end.

`to_dict` and `from_dict` map it to and from the JSON of `manifest.json`, keys and shapes
unchanged. A manifest read is untrusted input: `from_dict` checks it first, with the
validator pydantic derives from these declarations (harness.store.declare: `Malformed`
names the field). Parts a harness of an older version
did not write read as null (or empty); keys a newer writer added are kept, in each part's
`extra`, and written back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, TypeAlias

from harness.store import environment
from harness.store.declare import (
    As,
    Count,
    Error,
    GiB,
    MiB,
    NullIsEmpty,
    Positive,
    Ratio,
    Requires,
    Seconds,
    read,
)
from harness.store.details import ColdStart as ColdStart
from harness.store.details import Open
from harness.store.options import RunOptions
from harness.store.records import SCHEMA

JsonValue: TypeAlias = str | int | float | bool | list["JsonValue"] | dict[str, "JsonValue"] | None
# A JSON object as read, before or after validation: its values are typed by the parts.
JsonObject: TypeAlias = Mapping[str, Any]
# One variant's package versions as its workers saw them: "torch" -> "2.13.0", None where
# a package is not installed.
PackageVersions: TypeAlias = Mapping[str, str | None]
# Ray's resources, the measurement protocol: name -> a number of at least 0.
Numbers: TypeAlias = Annotated[Mapping[str, Error], NullIsEmpty()]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Part(Open):
    """A part of the manifest: its fields, then the keys a newer writer added (`extra`),
    every field written, None as null. `from_dict` trusts its input: `Manifest.from_dict`
    checks the whole manifest first."""

    WRITES_NULL: ClassVar[bool] = True


@dataclass(frozen=True)
class HarnessInfo(Part):
    """The harness that wrote the run."""

    version: str | None = None
    git_sha: str | None = None  # the checkout's commit, where the harness runs from one


@dataclass(frozen=True)
class Hardware(Part):
    """The driver's machine (harness.store.environment.hardware)."""

    cpu: str | None = None
    # family, model, stepping and kernel instruction sets (environment.cpu_id): two hosts
    # with one brand string can run ORT's kernels at half the speed of each other
    cpu_id: str | None = None
    cores: int | None = None
    memory_gb: GiB | None = None
    gpus: Annotated[tuple[str, ...], NullIsEmpty()] = ()
    machine: str | None = None
    system: str | None = None


@dataclass(frozen=True)
class Settings(Part):
    """How the cells were run: what must match for two runs' numbers to be comparable
    (threads, protocol), and the limits every cell had."""

    threads: Positive | None = None
    timeout_s: Seconds | None = None
    keep_onnx: bool | None = None
    graph_store: str | None = None  # the folder the kept graphs went to, if kept
    protocol: Numbers = field(default_factory=dict)  # harness.store.protocol.Protocol
    # the protocol's `latency_threads`: counts ORT and eager were also timed at
    latency_threads: Annotated[tuple[Count, ...], NullIsEmpty()] = ()
    max_memory_gb: GiB | None = None


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
    resources: Numbers = field(default_factory=dict)
    # The base environment's package versions as a worker on this node saw them (one
    # probe per node at the run's start); empty in manifests written before they were.
    versions: Annotated[PackageVersions, NullIsEmpty()] = field(default_factory=dict)


@dataclass(frozen=True)
class Cluster(Part):
    """The Ray cluster the run (or its last `--resume`) used."""

    address: str | None = None
    nodes: Annotated[tuple[Node, ...], NullIsEmpty()] = ()
    resources: Numbers = field(default_factory=dict)


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
    lost_nodes: Annotated[tuple[str, ...], NullIsEmpty()] = ()
    node_settle_s_max: Seconds | None = None  # the longest wait for a lost node's state
    driver_peak_rss_mb: MiB | None = None
    wall_s: Seconds | None = None
    cells_per_minute: Ratio | None = None


@dataclass(frozen=True)
class Manifest(Part):
    """What ran, where, with what: the run's `manifest.json`."""

    schema: Positive = SCHEMA  # the record schema of the harness that wrote it
    run_id: str | None = None
    started: str | None = None  # ISO 8601, UTC, to the second
    command: Annotated[tuple[str, ...], NullIsEmpty()] = ()  # the command line, as typed
    suite: str | None = None
    harness: HarnessInfo | None = None
    # per variant: package -> version as its workers saw it, null where not installed
    versions: Annotated[Mapping[str, PackageVersions], NullIsEmpty()] = field(default_factory=dict)
    hardware: Hardware | None = None
    settings: Settings | None = None
    matrix: str | None = None  # the announcement: "132 cells = 11 models x ..."
    cells: int | None = None
    # The `harness run` options, for --resume: RunOptions.to_dict() (harness.store.options),
    # which owns their names and types.
    options: Annotated[Mapping[str, JsonValue], As(RunOptions), NullIsEmpty()] = field(
        default_factory=dict
    )
    zoo_problems: Annotated[tuple[ZooProblem, ...], NullIsEmpty()] = ()
    cluster: Cluster | None = None
    finished: str | None = None  # null while the run is under way, or was killed
    dispatch: DispatchSummary | None = None
    # Per worker process, exporter and variant: the first export's time and memory.
    cold_start: Annotated[tuple[ColdStart, ...], Requires(("exporter",)), NullIsEmpty()] = ()

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


def check_manifest(d: object) -> None:
    """Raise `Malformed` unless `d` is a manifest this harness could have written (the
    validator pydantic derives from `Manifest`'s declaration)."""
    read(Manifest, d)
