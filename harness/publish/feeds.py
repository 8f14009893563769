"""The site's machine-readable files: the Atom feed of regressions, `regressions.json`, the
compact index and one JSON per series (pure: each returns the text to write)."""

from __future__ import annotations

import json
from xml.sax.saxutils import escape

from harness.publish.cells import Change
from harness.publish.html import slug
from harness.publish.model import Channel, Site
from harness.publish.nights import Point, SeriesKey

FORMAT = 1  # the version of the JSON files' shape


def _change(c: Change) -> dict[str, object]:
    return {
        "cell": c.cell,
        "model": c.model,
        "before": str(c.before),
        "after": str(c.after),
        "night": c.date,
        "signature": c.signature,
    }


def regressions_json(site: Site) -> str:
    """The newest night's regressions and fixes per channel, and the cells the channels
    disagree on."""
    data = {
        "format": FORMAT,
        "channels": {
            c.name: {
                "night": c.newest.date if c.newest else None,
                "regressions": [_change(x) for x in c.regressions],
                "fixes": [_change(x) for x in c.fixes],
            }
            for c in site.channels
        },
        "differences": [
            {"cell": d.cell, "model": d.model, "statuses": d.statuses} for d in site.differences
        ],
    }
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def atom(site: Site, *, base_url: str, updated: str) -> str:
    """One entry per channel and night with regressions, newest first (the last 30 nights)."""
    entries = []
    for c in site.channels:
        for date, found in reversed(c.history):
            lines = "\n".join(f"{x.cell}: {x.before} → {x.after}" for x in found)
            entry_id = f"{base_url}#{c.name}-{date}"
            entries.append(
                (
                    date,
                    "<entry>"
                    f"<title>{escape(c.name)} {escape(date)}: {len(found)} regressions</title>"
                    f"<id>{escape(entry_id)}</id><updated>{escape(date)}T00:00:00Z</updated>"
                    f'<link href="{escape(base_url, {chr(34): "&quot;"})}"/>'
                    f'<content type="text">{escape(lines)}</content></entry>',
                )
            )
    body = "".join(text for _, text in sorted(entries, key=lambda x: x[0], reverse=True))
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<feed xmlns="http://www.w3.org/2005/Atom">'
        f"<title>ONNX exporters nightly: regressions</title><id>{escape(base_url)}</id>"
        f"<updated>{escape(updated)}</updated><author><name>harness publish</name></author>"
        f"{body}</feed>\n"
    )


def series_name(channel: str, key: SeriesKey) -> str:
    return slug(f"{channel}/{key.label()}")


def series_json(key: SeriesKey, points: list[Point]) -> str:
    data = {
        "format": FORMAT,
        "suite": key.suite,
        "exporter": key.exporter,
        "dtype": key.dtype or None,
        "task": key.task or None,
        "points": [[p.date, round(p.value, 2)] for p in points],
    }
    return json.dumps(data, separators=(",", ":")) + "\n"


def _channel_index(c: Channel) -> dict[str, object]:
    return {
        "nights": len(c.nights),
        "newest": c.newest.date if c.newest else None,
        "series": [
            {
                "label": key.label(),
                "file": f"data/series/{series_name(c.name, key)}.json",
                "passing": c.newest_rates[key].passing if key in c.newest_rates else None,
                "total": c.newest_rates[key].total if key in c.newest_rates else None,
            }
            for key in c.series
        ],
        "suites": {s: f"suite/{slug(c.name + '/' + s)}.html" for s in c.suites},
    }


def index_json(site: Site) -> str:
    data = {
        "format": FORMAT,
        "channels": {c.name: _channel_index(c) for c in site.channels},
        "models": {m: f"model/{slug(m)}.html" for m in site.models()},
    }
    return json.dumps(data, separators=(",", ":"), sort_keys=True) + "\n"
