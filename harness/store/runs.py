"""A run as the later stages read it: its manifest and records, from a run directory or
the history database, and what must match for two runs' numbers to be comparable."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.store.records import CellKey, Record
from harness.store.rundir import read_manifest, read_records


@dataclass(frozen=True)
class Run:
    """A run's manifest and records, from a run directory or the history database."""

    manifest: dict[str, Any]
    records: tuple[Record, ...]
    path: str | None = None

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path or "?")

    @property
    def started(self) -> str:
        return str(self.manifest.get("started") or "")

    def by_cell(self) -> dict[CellKey, Record]:
        """Records keyed by cell; a repeated cell (a resumed run) keeps its last record."""
        return {r.cell.key: r for r in self.records}

    def versions(self, variant: str = "base") -> dict[str, Any]:
        return dict((self.manifest.get("versions") or {}).get(variant) or {})


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
    versions = (run.manifest.get("versions") or {}).get(variant) or {}
    cold = [
        {**e, "variant": label}
        for e in run.manifest.get("cold_start") or ()
        if (e.get("variant") or "base") == variant
    ]
    manifest = {
        **run.manifest,
        "run_id": f"{run.run_id}@{variant}",
        "versions": {"base": versions, label: versions},
        "cold_start": cold,
    }
    return Run(manifest=manifest, records=records, path=run.path)


def comparability(manifest: dict[str, Any]) -> dict[str, Any]:
    """What must match for two runs' numbers to be comparable: hardware, threads, protocol.

    Versions are deliberately absent: they are what a comparison compares. The device is
    part of each cell, so it is compared cell by cell.
    """
    hardware = manifest.get("hardware") or {}
    settings = manifest.get("settings") or {}
    return {
        "cpu": hardware.get("cpu"),
        "cores": hardware.get("cores"),
        "gpus": hardware.get("gpus") or [],
        "threads": settings.get("threads"),
        "protocol": settings.get("protocol") or {},
    }


def comparability_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Human-readable differences between two manifests' comparability, e.g. 'cores 8 vs 4'."""
    ca, cb = comparability(a), comparability(b)
    return [f"{k} {ca[k]!r} vs {cb[k]!r}" for k in ca if ca[k] != cb[k]]
