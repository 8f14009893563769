"""The `harness run` options (`RunOptions`), declared once: the planner (harness.plan)
takes them, the manifest's `options` keeps them (`to_dict`), `--resume` and `repro` read
them back (`from_dict`), and the manifest's validator is derived from the same fields
(harness.store.declare), so that the reader accepts exactly what the writer writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import GetCoreSchemaHandler
from pydantic_core import PydanticCustomError
from pydantic_core import core_schema as cs

from harness.store.axes import LIST_AXES, Axis
from harness.store.declare import GiB, Positive, Seconds, read


class Shapes(StrEnum):
    """Which shapes a run exports: static cells only, static and dynamic cells (`--dynamic`),
    or dynamic cells only (`--dynamic-only`: a suite of entries that only make sense dynamic,
    such as a decode step with a KV cache)."""

    STATIC = "static"
    BOTH = "both"
    ONLY = "only"

    @classmethod
    def of(cls, value: object) -> Shapes:
        """The shapes a suite file, a manifest or an older caller names: `false` (static),
        `true` (static and dynamic), or a name."""
        if isinstance(value, bool):
            return cls.BOTH if value else cls.STATIC
        if isinstance(value, str):
            return cls(value)
        raise ValueError(f"{value!r} is not one of false, true, {', '.join(map(repr, cls))}")

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        """What `json` writes (false, true, "only"), or a name."""

        def shapes(value: object) -> Shapes:
            try:
                return Shapes.of(value)
            except ValueError:
                known = "false, true, " + ", ".join(repr(s.value) for s in Shapes)
                problem = f"must be one of {known}, not {value!r}"
                raise PydanticCustomError("harness", problem, {"problem": problem}) from None

        return cs.no_info_plain_validator_function(shapes)

    @property
    def json(self) -> bool | str:
        """The value `manifest.json` holds: `false`, `true` or `"only"`, as every harness
        wrote it (a reader of schema 4 reads the two booleans)."""
        return {Shapes.STATIC: False, Shapes.BOTH: True}.get(self, self.value)

    @property
    def dynamic(self) -> bool:
        """Whether the run has dynamic cells."""
        return self is not Shapes.STATIC


@dataclass(frozen=True)
class RunOptions:
    """What the user asked for (the `harness run` flags), before validation."""

    suite: str | None = None
    models: tuple[str, ...] = ()
    exporters: tuple[str, ...] = ()
    opsets: tuple[int, ...] = ()
    devices: tuple[str, ...] = ()
    dynamic: Shapes | None = None  # None: the suite's
    zoo: tuple[str, ...] = ()
    out: str | None = None
    timeout_s: Seconds = 600.0
    threads: Positive = 1
    keep_onnx: bool = False
    # "run" (the run's graphs/ folder) or a folder shared by runs; None: graphs not kept
    keep_graphs: str | None = None
    address: str | None = None
    local: bool = False  # on this machine without Ray (harness.dispatch.local)
    max_memory_gb: GiB | None = None
    variants: tuple[str, ...] = ()  # "NAME=PIP_SPEC[,PIP_SPEC...]"
    # `--protocol`: "KEY=VALUE,..." over the suite's [protocol] (harness.store.protocol)
    protocol: str | None = None
    # The values each list axis's flag named (harness.store.axes: patch, dtype, ORT
    # optimisation, ...), by the axis's name; an axis not here: the suite's, else its default.
    axes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Older callers and manifests name the shapes true, false or "only".
        if self.dynamic is not None:
            object.__setattr__(self, "dynamic", Shapes.of(self.dynamic))

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return {**d, "dynamic": None if self.dynamic is None else self.dynamic.json}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunOptions:
        return read(cls, _update_axes(d))  # type: ignore[no-any-return]

    def values(self, axis: Axis[Any]) -> tuple[str, ...]:
        """The values the axis's flag named; () where it named none."""
        return tuple(self.axes.get(axis.name, ()))


def _update_axes(d: dict[str, Any]) -> dict[str, Any]:
    """Manifests before the axes were declared kept each list axis's values under its plural
    (`dtypes`, `ort_opts`, `patches`): they read as the same axes."""
    legacy = {a.plural: a.name for a in LIST_AXES if a.plural in d}
    if not legacy:
        return d
    axes = dict(d.get("axes") or {})
    axes |= {name: d[plural] for plural, name in legacy.items() if d[plural]}
    return {**{k: v for k, v in d.items() if k not in legacy}, "axes": axes}
