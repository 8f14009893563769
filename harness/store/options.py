"""The values of the `harness run` options that are neither flags nor numbers, declared once:
the planner (harness.plan) takes them, the manifest's `options` keeps them, and its reader
accepts exactly what the writer writes."""

from __future__ import annotations

from enum import StrEnum


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

    @property
    def json(self) -> bool | str:
        """The value `manifest.json` holds: `false`, `true` or `"only"`, as every harness
        wrote it (a reader of schema 4 reads the two booleans)."""
        return {Shapes.STATIC: False, Shapes.BOTH: True}.get(self, self.value)

    @property
    def dynamic(self) -> bool:
        """Whether the run has dynamic cells."""
        return self is not Shapes.STATIC
