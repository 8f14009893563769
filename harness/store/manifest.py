"""The run's manifest (contract, docs/design.md: `manifest.json`): what ran, where, with what.

One frozen `Manifest`, built in one place (`Manifest.begin`) once the cluster is up, then
replaced, never edited: `resumed` when `--resume` continues a run on a new cluster,
`finished` with the dispatch figures at the end. Readers get the JSON dict back through
`read_manifest` (harness.store.rundir), which refuses schemas newer than this harness.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from harness.store import environment
from harness.store.records import SCHEMA


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Manifest:
    run_id: str
    started: str
    command: tuple[str, ...]
    suite: str | None
    harness: dict[str, Any]
    versions: dict[str, dict[str, Any]]  # per variant, as its workers saw them
    hardware: dict[str, Any]
    settings: dict[str, Any]  # threads, timeout_s, keep_onnx, protocol, max_memory_gb
    matrix: str  # the announcement: "132 cells = 11 models x ..."
    cells: int
    options: dict[str, Any]  # the `harness run` options, for --resume
    zoo_problems: tuple[dict[str, str], ...]
    cluster: dict[str, Any]
    finished: str | None = None
    dispatch: dict[str, Any] | None = None
    # Per worker process, exporter and variant: the first export's time and memory.
    cold_start: tuple[dict[str, Any], ...] = ()
    schema: int = SCHEMA
    extra: dict[str, Any] = field(default_factory=dict)  # keys a newer writer added

    @classmethod
    def begin(
        cls,
        *,
        run_id: str,
        command: list[str],
        suite: str | None,
        settings: dict[str, Any],
        matrix: str,
        cells: int,
        options: dict[str, Any],
        zoo_problems: list[dict[str, str]],
        cluster: dict[str, Any],
        versions: dict[str, dict[str, Any]],
    ) -> Manifest:
        """The manifest of a run about to dispatch its first cell."""
        return cls(
            run_id=run_id,
            started=now_iso(),
            command=tuple(command),
            suite=suite,
            harness=environment.harness_info(),
            versions=versions,
            hardware=environment.hardware(),
            settings=settings,
            matrix=matrix,
            cells=cells,
            options=options,
            zoo_problems=tuple(zoo_problems),
            cluster=cluster,
        )

    def resumed(self, *, cluster: dict[str, Any], versions: dict[str, dict[str, Any]]) -> Manifest:
        """The same run continued by `--resume`, possibly on another cluster."""
        return dataclasses.replace(self, cluster=cluster, versions=versions, finished=None)

    def finished_with(
        self, dispatch: dict[str, Any], cold_start: tuple[dict[str, Any], ...] = ()
    ) -> Manifest:
        return dataclasses.replace(
            self, finished=now_iso(), dispatch=dispatch, cold_start=self.cold_start + cold_start
        )

    @property
    def max_memory_gb(self) -> float | None:
        value = self.settings.get("max_memory_gb")
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        d["command"] = list(self.command)
        d["zoo_problems"] = list(self.zoo_problems)
        d["cold_start"] = list(self.cold_start)
        return {"schema": d.pop("schema"), **d, **self.extra}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Manifest:
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in d.items() if k in known}
        values["command"] = tuple(values.get("command") or ())
        values["zoo_problems"] = tuple(values.get("zoo_problems") or ())
        values["cold_start"] = tuple(values.get("cold_start") or ())
        return cls(**values, extra={k: v for k, v in d.items() if k not in known})
