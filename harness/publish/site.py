"""`harness publish`'s shell: read each channel's history database, build the `Site`
model, and write the pages, data files, feeds and the current failures' repro files."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness.publish import assets, feeds, pages, ways
from harness.publish.html import slug
from harness.publish.model import Site, build_site_model
from harness.publish.read import CellResult, load_nights
from harness.store import files

# Kept for a current failure only, and only the small text files a person opens.
REPRO_SUFFIXES = (".py", ".md", ".txt")
MAX_REPRO_BYTES = 256 * 1024
DEFAULT_URL = "https://example.invalid/"


@dataclass(frozen=True)
class Published:
    files: int
    bytes: int
    seconds: float
    nights: dict[str, int]


def _repro_files(r: CellResult, run_dir: str | None, out: Path) -> dict[str, str]:
    """Copy a failing record's repro scripts and reports into the site; name -> site path.
    A path that leaves the run directory, a symlink, a big or binary file is left out."""
    if run_dir is None or r.status.passing:
        return {}
    root = Path(run_dir)
    kept = {}
    for name, relative in sorted(r.artifacts.items()):
        if not (name.startswith("repro") or name.startswith("report")):
            continue
        try:
            source = files.inside(root, relative)
        except files.RunDirError:
            continue
        if source.suffix not in REPRO_SUFFIXES or not source.is_file():
            continue
        if source.stat().st_size > MAX_REPRO_BYTES:
            continue
        target = f"repro/{slug(r.run_id + '/' + r.cell.label())}/{slug(name)}{source.suffix}.txt"
        files.write_inside(out, target, source.read_bytes())
        kept[name] = target
    return kept


def _copy_repros(site: Site, out: Path) -> dict[str, dict[str, dict[str, str]]]:
    """channel -> cell -> artifact name -> site path, for the newest night's failures."""
    found: dict[str, dict[str, dict[str, str]]] = {}
    for c in site.channels:
        if c.newest is None:
            continue
        run_dirs = {r.run_id: r.run_dir for r in c.newest.runs}
        per_cell = {}
        for r in c.newest.records:
            kept = _repro_files(r, run_dirs.get(r.run_id), out)
            if kept:
                per_cell[r.cell.label()] = kept
        found[c.name] = per_cell
    return found


def _write_pages(site: Site, out: Path, repros: Mapping[str, dict[str, dict[str, str]]]) -> None:
    write = files.write_inside
    write(out, "index.html", pages.overview(site))
    write(out, "channels.html", pages.channels_page(site))
    write(out, "clusters.html", pages.clusters_page(site, repros))
    write(out, "coverage.html", pages.coverage_page(site))
    for model in site.models():
        write(out, f"model/{slug(model)}.html", pages.model_page(site, model, repros))
    for c in site.channels:
        others = [o for o in site.channels if o is not c and o.newest is not None]
        twin = others[0].newest.cells if others and others[0].newest else {}
        for suite in c.suites:
            write(out, f"suite/{slug(c.name + '/' + suite)}.html", pages.suite_page(c, suite, twin))
            if found := ways.architectures(c.suites[suite]):
                write(
                    out, f"ways/{slug(c.name + '/' + suite)}.html", ways.ways_page(c, suite, found)
                )


def _write_data(site: Site, out: Path, *, base_url: str) -> None:
    write = files.write_inside
    write(out, "assets/site.css", assets.CSS)
    write(out, "assets/site.js", assets.JS)
    write(out, "data/index.json", feeds.index_json(site))
    for c in site.channels:
        for key, points in c.series.items():
            name = feeds.series_name(c.name, key)
            write(out, f"data/series/{name}.json", feeds.series_json(key, points))
    write(out, "regressions.json", feeds.regressions_json(site))
    updated = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    write(out, "atom.xml", feeds.atom(site, base_url=base_url, updated=updated))
    write(out, ".nojekyll", "")


def publish(
    channels: Mapping[str, Path],
    out: Path,
    *,
    base_url: str = DEFAULT_URL,
    missing: Mapping[str, str] | None = None,
) -> Published:
    """Build the site in `out` from one history database per channel (name -> path);
    `missing` names the channels without one tonight and why (the site says so).
    HistoryError (a missing or unreadable database) and RunDirError propagate."""
    start = time.perf_counter()
    runs = {name: load_nights(db) for name, db in channels.items()}
    site = build_site_model(runs, missing)
    out.mkdir(parents=True, exist_ok=True)
    repros = _copy_repros(site, out)
    _write_pages(site, out, repros)
    _write_data(site, out, base_url=base_url)
    written = [p for p in out.rglob("*") if p.is_file()]
    return Published(
        files=len(written),
        bytes=sum(p.stat().st_size for p in written),
        seconds=time.perf_counter() - start,
        nights={c.name: len(c.nights) for c in site.channels},
    )
