"""The site's pure core, part one: runs grouped into nights per channel, the series of pass
rates (suite x exporter x dtype x task, only combinations that exist), their resampling,
and the environment's diff between two nights. No I/O: runs in, plain values out."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from harness.publish.read import CellResult, NightRun
from harness.store.manifest import Node
from harness.store.tasks import PassRate

MAX_POINTS = 300  # a series keeps at most this many points (asv#438: sites that grew past 1 GB)
STABLE, PRE_RELEASE = "stable", "pre-release"
BASE = "base"  # the variant every run has: the environment the cluster was started in


@dataclass(frozen=True)
class Night:
    """One night of one channel: its date and the records of every run that started that
    day (a later run of a suite replaces an earlier one's cells)."""

    date: str
    runs: tuple[NightRun, ...]
    records: tuple[CellResult, ...]

    @cached_property
    def cells(self) -> dict[str, CellResult]:
        return {r.cell.label(): r for r in self.records}


def nights_of(runs: Iterable[NightRun]) -> tuple[Night, ...]:
    """The runs grouped by the day they started, oldest first; within a day, the later
    record of a cell wins (a rerun of the nightly)."""
    days: dict[str, list[NightRun]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: (r.started, r.run_id)):
        days[run.started[:10] or run.run_id].append(run)
    nights = []
    for date in sorted(days):
        cells: dict[str, CellResult] = {}
        for run in days[date]:
            cells.update((r.cell.label(), r) for r in run.results)
        nights.append(Night(date, tuple(days[date]), tuple(cells[k] for k in sorted(cells))))
    return tuple(nights)


# -- the series of pass rates ------------------------------------------------------------------


@dataclass(frozen=True)
class SeriesKey:
    """One line of the overview: a suite x exporter (x dtype, x task where records say)."""

    suite: str
    exporter: str
    dtype: str = ""
    task: str = ""

    def label(self) -> str:
        return " · ".join(p for p in (self.suite, self.exporter, self.dtype, self.task) if p)


@dataclass(frozen=True)
class Point:
    date: str
    value: float  # percent passing


def series_key(r: CellResult) -> SeriesKey:
    return SeriesKey(r.suite, r.cell.exporter, r.dtype, r.task)


def pass_rates(night: Night) -> dict[SeriesKey, PassRate]:
    """Per series, how many attempted cells exported and passed every check that night."""
    counts: dict[SeriesKey, list[int]] = defaultdict(lambda: [0, 0])
    for r in night.records:
        if not r.status.applies:
            continue
        count = counts[series_key(r)]
        count[0] += int(r.status.exported)
        count[1] += 1
    return {k: PassRate(p, t) for k, (p, t) in sorted(counts.items(), key=lambda kv: kv[0].label())}


def rate_series(nights: Sequence[Night]) -> dict[SeriesKey, list[Point]]:
    """Every series that exists on some night -> its pass rate on the nights it ran."""
    out: dict[SeriesKey, list[Point]] = defaultdict(list)
    for night in nights:
        for key, rate in pass_rates(night).items():
            out[key].append(Point(night.date, rate.percent))
    return dict(sorted(out.items(), key=lambda kv: kv[0].label()))


def resample(points: Sequence[Point], max_points: int = MAX_POINTS) -> list[Point]:
    """At most `max_points` points: consecutive buckets of nearly equal size, each the mean
    of its values dated by its last night (the newest night always stays the last point)."""
    if len(points) <= max_points:
        return list(points)
    n = len(points)
    out = []
    for b in range(max_points):
        bucket = points[b * n // max_points : (b + 1) * n // max_points]
        out.append(Point(bucket[-1].date, sum(p.value for p in bucket) / len(bucket)))
    return out


# -- the environment ---------------------------------------------------------------------------


@dataclass(frozen=True)
class VersionMove:
    where: str  # "node HOST" (the base environment on that node), or "variant NAME"
    package: str
    before: str | None
    after: str | None

    def text(self) -> str:
        return f"{self.where}: {self.package} {self.before or '(none)'} → {self.after or '(none)'}"


Versions = dict[str, str | None]


@dataclass(frozen=True)
class Environment:
    """A night's package versions: per node (the base environment as a worker there saw
    it, where the manifests recorded it) and per variant (a package set), a later run
    winning."""

    nodes: dict[str, Versions]
    variants: dict[str, Versions]


def _node_name(node: Node) -> str:
    return node.host or node.address or node.node_id or "?"


def environment(night: Night) -> Environment:
    nodes: dict[str, Versions] = {}
    variants: dict[str, Versions] = {}
    for run in night.runs:
        for node in run.manifest.cluster.nodes if run.manifest.cluster else ():
            if node.versions:
                nodes.setdefault(_node_name(node), {}).update(node.versions)
        for variant, versions in run.manifest.versions.items():
            variants.setdefault(variant, {}).update(versions)
    return Environment(nodes, variants)


def base_versions(night: Night) -> Versions:
    """The night's base environment: the packages every cell of it ran with."""
    return dict(environment(night).variants.get(BASE, {}))


def _moves(
    where: str, old: Mapping[str, str | None], new: Mapping[str, str | None]
) -> list[VersionMove]:
    return [
        VersionMove(where, package, old.get(package), new.get(package))
        for package in sorted(set(old) | set(new))
        if old.get(package) != new.get(package)
    ]


def environment_diff(before: Night | None, after: Night) -> list[VersionMove]:
    """What moved between two nights, per node where the newest night's manifests
    recorded each node's versions (a node new that night, or the night before's manifests
    without them: against the night before's base variant), else per base variant; and
    per other variant. A package whose version changed, came or went."""
    if before is None:
        return []
    old, new = environment(before), environment(after)
    old_base = old.variants.get(BASE, {})
    moves = []
    for host in sorted(new.nodes):
        moves += _moves(f"node {host}", old.nodes.get(host, old_base), new.nodes[host])
    for variant in sorted(set(old.variants) | set(new.variants)):
        if variant == BASE and new.nodes:
            continue  # the nodes said it
        o, n = old.variants.get(variant, {}), new.variants.get(variant, {})
        moves += _moves(f"variant {variant}", o, n)
    return moves
