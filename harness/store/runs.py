"""A run as the later stages read it: its manifest and records, from a run directory or
the history database, and what must match for two runs' numbers to be comparable."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from harness.store.manifest import Hardware, JsonValue, Manifest, PackageVersions, Settings
from harness.store.records import CellKey, Record
from harness.store.rundir import read_manifest, read_records


@dataclass(frozen=True)
class Run:
    """A run's manifest and records, from a run directory or the history database."""

    manifest: Manifest
    records: tuple[Record, ...]
    path: str | None = None

    @property
    def run_id(self) -> str:
        return self.manifest.run_id or self.path or "?"

    @property
    def started(self) -> str:
        return self.manifest.started or ""

    def by_cell(self) -> dict[CellKey, Record]:
        """Records keyed by cell; a repeated cell (a resumed run) keeps its last record."""
        return {r.cell.key: r for r in self.records}

    def versions(self, variant: str = "base") -> PackageVersions:
        return self.manifest.variant_versions(variant)


def read_run(path: Path) -> Run:
    """Read a run directory; RunDirError (missing, unreadable, schema too new) propagates."""
    manifest = read_manifest(path)
    return Run(manifest=manifest, records=tuple(read_records(path)), path=str(path))


class VariantError(ValueError):
    """A variant the run does not hold; the message names the ones it does."""


def variant_run(run: Run, variant: str, *, label: str = "base") -> Run:
    """One variant of a run (`--variant`) as a run of its own, its records, exporter cold
    starts and versions relabelled to the variant `label`, so that two variants of one run
    compare cell by cell like two runs (`harness compare RUN --variants base,new` labels
    both sides `new`)."""
    records = tuple(r.with_cell(variant=label) for r in run.records if r.variant == variant)
    if not records:
        held = ", ".join(sorted({r.variant for r in run.records})) or "none"
        raise VariantError(
            f"{run.path or run.run_id} has no records of variant {variant!r} (it has: {held})"
        )
    versions = run.versions(variant)
    cold = tuple(
        dataclasses.replace(e, variant=label)
        for e in run.manifest.cold_start
        if e.variant_name == variant
    )
    manifest = dataclasses.replace(
        run.manifest,
        run_id=f"{run.run_id}@{variant}",
        versions={"base": versions, label: versions},
        cold_start=cold,
    )
    return Run(manifest=manifest, records=records, path=run.path)


def comparability(manifest: Manifest) -> dict[str, JsonValue]:
    """What must match for two runs' numbers to be comparable: hardware, threads, protocol.

    Versions are deliberately absent: they are what a comparison compares. The device is
    part of each cell, so it is compared cell by cell.
    """
    hardware = manifest.hardware or Hardware()
    settings = manifest.settings or Settings()
    found: dict[str, JsonValue] = {
        "cpu": hardware.cpu,
        "cores": hardware.cores,
        "gpus": list(hardware.gpus),
        "threads": settings.threads,
        "protocol": dict(settings.protocol),
    }
    if hardware.cpu_id:  # a run written before the manifest said it matches on the rest
        found["cpu_id"] = hardware.cpu_id
    return found


def comparability_differences(a: Manifest, b: Manifest) -> list[str]:
    """Human-readable differences between two manifests' comparability, e.g. 'cores 8 vs 4'
    (what only one of them says, a run's CPU identity, is no difference)."""
    ca, cb = comparability(a), comparability(b)
    return [f"{k} {ca[k]!r} vs {cb[k]!r}" for k in ca if k in cb and ca[k] != cb[k]]
