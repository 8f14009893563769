"""The site's HTML pieces: the page shell under a strict Content-Security-Policy, escaping,
file names for untrusted names, and inline SVG sparklines. Every value that comes from a
record or a manifest goes through `e` (docs/design.md: every value from a record is escaped
wherever it is rendered); the pages carry no inline script or style, no external URL."""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Iterable, Sequence

from harness.publish.nights import Point

# Only the site's own files: no inline code, no other origin (works offline and on Pages).
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'"
)
PAGES = (
    ("index.html", "Overview"),
    ("channels.html", "Channels"),
    ("clusters.html", "Failure clusters"),
    ("coverage.html", "Op coverage"),
)


def e(value: object) -> str:
    """A value as HTML text (quotes too: safe inside an attribute)."""
    return html.escape("" if value is None else str(value), quote=True)


def slug(name: str) -> str:
    """A file name for an untrusted name: its safe characters plus a hash of the whole
    (two names that clean to the same text stay apart; `../`, newlines and markup go)."""
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip(".-")[:48] or "x"
    return f"{clean}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def page(title: str, body: str, *, up: str = "", script: bool = False) -> str:
    """A whole page; `up` is the path back to the site's root ('' or '../')."""
    nav = " ".join(f'<a href="{up}{href}">{e(text)}</a>' for href, text in PAGES)
    js = f'<script src="{up}assets/site.js" defer></script>' if script else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title>"
        f'<link rel="stylesheet" href="{up}assets/site.css">'
        '<link rel="icon" href="data:,">'
        f'<link rel="alternate" type="application/atom+xml" href="{up}atom.xml" title="Regressions">'
        f"{js}</head><body><nav>{nav} "
        f'<a href="{up}atom.xml">Atom</a> <a href="{up}regressions.json">regressions.json</a></nav>'
        f"<main><h1>{e(title)}</h1>{body}</main></body></html>\n"
    )


def table(head: Sequence[str], rows: Iterable[str], *, attrs: str = "") -> str:
    """A table from already escaped row HTML (each row's `<tr>` included)."""
    cols = "".join(f"<th>{e(h)}</th>" for h in head)
    body = "".join(rows)
    return f"<table{attrs}><thead><tr>{cols}</tr></thead><tbody>{body}</tbody></table>"


def status_cell(status: str | None, extra: str = "") -> str:
    if status is None:
        return '<td class="none">—</td>'
    css = re.sub(r"[^a-z_]", "", status)
    return f'<td class="st st-{css}">{e(status)}{extra}</td>'


def _polyline(points: Sequence[Point], width: int, height: int, top: float) -> str:
    n = max(len(points) - 1, 1)
    coords = " ".join(
        f"{i * width / n:.1f},{height - 2 - (height - 4) * min(p.value, top) / top:.1f}"
        for i, p in enumerate(points)
    )
    return f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{coords}"/>'


def sparkline(
    points: Sequence[Point], *, width: int = 120, height: int = 24, top: float | None = None
) -> str:
    """An inline SVG line of the points (0..top, or 0..max); nothing for fewer than two."""
    if len(points) < 2:
        return ""
    high = top if top is not None else max(p.value for p in points) or 1.0
    label = e(f"{points[0].date} … {points[-1].date}")
    return (
        f'<svg class="spark" width="{width}" height="{height}" role="img" aria-label="{label}">'
        f"{_polyline(points, width, height, high)}</svg>"
    )


def band_chart(points: Sequence[Point], low: float | None, high: float | None) -> str:
    """A small chart of a metric over nights with the noise band as a shaded strip."""
    if not points:
        return '<span class="none">not measured</span>'
    width, height = 240, 48
    values = [p.value for p in points] + [v for v in (low, high) if v is not None]
    top = max(values) * 1.05 or 1.0
    band = ""
    if low is not None and high is not None:
        y1 = height - 2 - (height - 4) * high / top
        y2 = height - 2 - (height - 4) * low / top
        band = f'<rect class="band" x="0" y="{y1:.1f}" width="{width}" height="{max(y2 - y1, 1):.1f}"/>'
    return (
        f'<svg class="chart" width="{width}" height="{height}" role="img" '
        f'aria-label="{e(points[-1].value)}">{band}{_polyline(points, width, height, top)}</svg>'
    )
