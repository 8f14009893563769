"""What the site shows, computed once from each channel's nights: the `Channel` every page
and data file is rendered from (pure: no files read or written here)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.compare.thresholds import Thresholds
from harness.publish import cells
from harness.publish.nights import (
    Night,
    Point,
    SeriesKey,
    VersionMove,
    Versions,
    base_versions,
    environment_diff,
    nights_of,
    pass_rates,
    rate_series,
    resample,
)
from harness.publish.read import CellResult, NightRun
from harness.store.tasks import PassRate


@dataclass(frozen=True)
class Channel:
    """One channel (stable, pre-release) of the site: its nights and what they say."""

    name: str
    nights: tuple[Night, ...]
    series: dict[SeriesKey, list[Point]]  # resampled
    newest_rates: dict[SeriesKey, PassRate]
    regressions: list[cells.Change]
    fixes: list[cells.Change]
    environment: list[VersionMove]
    since: dict[str, str]  # newest night's cells -> night their status began
    clusters: list[cells.Cluster]
    coverage: cells.Coverage
    suites: dict[str, list[CellResult]] = field(default_factory=dict)  # newest night, per suite
    history: list[tuple[str, list[cells.Change]]] = field(default_factory=list)  # feed
    per_model: dict[str, cells.Seen] = field(default_factory=dict)

    @property
    def newest(self) -> Night | None:
        return self.nights[-1] if self.nights else None

    def models(self) -> list[str]:
        return sorted(self.per_model)


FEED_NIGHTS = 30  # the Atom feed and regressions history keep this many nights


def _suites(night: Night) -> dict[str, list[CellResult]]:
    by_suite: dict[str, list[CellResult]] = {}
    for r in night.records:
        by_suite.setdefault(r.suite, []).append(r)
    return dict(sorted(by_suite.items()))


def build_channel(name: str, runs: Sequence[NightRun]) -> Channel:
    nights = nights_of(runs)
    newest = nights[-1] if nights else None
    previous = nights[-2] if len(nights) > 1 else None
    regressions, fixes = cells.changes(previous, newest) if newest else ([], [])
    history = [
        (after.date, cells.changes(before, after)[0])
        for before, after in list(itertools.pairwise(nights))[-FEED_NIGHTS:]
    ]
    return Channel(
        name=name,
        nights=nights,
        series={k: resample(v) for k, v in rate_series(nights).items()},
        newest_rates=pass_rates(newest) if newest else {},
        regressions=regressions,
        fixes=fixes,
        environment=environment_diff(previous, newest) if newest else [],
        since=cells.last_changed(nights),
        clusters=cells.clusters(nights),
        coverage=cells.coverage(nights),
        suites=_suites(newest) if newest else {},
        history=[h for h in history if h[1]],
        per_model=cells.by_model(nights),
    )


@dataclass(frozen=True)
class Site:
    channels: tuple[Channel, ...]
    differences: list[cells.Difference]
    thresholds: Thresholds = Thresholds()
    # channel -> why it has no history tonight (its job published none: an install that
    # failed, a cancelled job); the other channels publish without it
    missing: dict[str, str] = field(default_factory=dict)

    def versions(self) -> dict[str, Versions]:
        """Each channel's newest night's versions (its base environment)."""
        return {c.name: base_versions(c.newest) if c.newest else {} for c in self.channels}

    def models(self) -> list[str]:
        return sorted({m for c in self.channels for m in c.models()})


def build_site_model(
    channels: Mapping[str, Sequence[NightRun]], missing: Mapping[str, str] | None = None
) -> Site:
    built = tuple(build_channel(name, runs) for name, runs in channels.items())
    newest = {c.name: c.newest for c in built if c.newest is not None}
    differences = cells.channel_differences(newest) if len(newest) > 1 else []
    return Site(built, differences, missing=dict(missing or {}))
