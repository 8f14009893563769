"""The site's pages as HTML text, from the `Site` model: overview, channels, per-suite
matrix (filters in site.js), per-model timelines, failure clusters, op coverage. Every
record or manifest value goes through `e`; links to untrusted names go through `slug`."""

from __future__ import annotations

import re
from collections.abc import Mapping

from harness.publish import ways
from harness.publish.cells import Band, Change, Cluster, timelines
from harness.publish.html import band_chart, e, page, slug, sparkline, status_cell, table
from harness.publish.matrix import SubCell, suite_matrix
from harness.publish.model import Channel, Site
from harness.publish.nights import Point
from harness.publish.read import CellResult

FILTERS = ("family", "task", "exporter", "opset", "status")
# The packages each channel's heading names (the channels page lists every package).
TRACKED = ("torch", "onnxscript", "onnx-ir", "onnx", "onnxruntime", "transformers")


def _changes(title: str, found: list[Change], up: str = "") -> str:
    if not found:
        return f"<h3>{e(title)}</h3><p>none</p>"
    rows = (
        f'<tr><td><a href="{up}model/{slug(c.model)}.html">{e(c.cell)}</a></td>'
        f"<td>{e(c.before)}</td><td>{e(c.after)}</td><td>{e(c.signature or '')}</td></tr>"
        for c in found
    )
    return f"<h3>{e(title)} ({len(found)})</h3>" + table(
        ("cell", "before", "now", "signature"), rows
    )


def overview(site: Site) -> str:
    keys = sorted({k for c in site.channels for k in c.series}, key=lambda k: k.label())
    head = ["suite · exporter · dtype · task"] + [c.name for c in site.channels]
    rows = []
    for key in keys:
        tds = []
        for c in site.channels:
            rate = c.newest_rates.get(key)
            text = rate.text() if rate else "—"
            tds.append(f"<td>{e(text)} {sparkline(c.series.get(key, []), top=100.0)}</td>")
        rows.append(f"<tr><th>{e(key.label())}</th>{''.join(tds)}</tr>")
    body = "<h2>Pass rate over nights</h2>" + table(head, rows, attrs=' class="rates"')
    body += _missing(site) + _channels_summary(site)
    versions = site.versions()
    for c in site.channels:
        newest = c.newest
        date = newest.date if newest else "no night yet"
        ran = ", ".join(f"{p} {versions[c.name][p]}" for p in TRACKED if versions[c.name].get(p))
        body += f'<section class="channel"><h2>{e(c.name)}: {e(date)}</h2>'
        body += f"<p class=versions>{e(ran or 'versions not recorded')}</p>"
        body += _changes("Regressions", c.regressions) + _changes("Fixes", c.fixes)
        moves = "".join(f"<li>{e(m.text())}</li>" for m in c.environment)
        body += (
            f"<h3>Environment since the previous night</h3><ul>{moves or '<li>no change</li>'}</ul>"
        )
        suites = "".join(
            f'<li><a href="suite/{slug(c.name + "/" + s)}.html">{e(s)}</a></li>' for s in c.suites
        )
        body += f"<h3>Suites</h3><ul>{suites}</ul></section>"
    return page("ONNX exporters nightly", body)


def _named(cells: list[str], most: int = 8) -> str:
    more = f" and {len(cells) - most} more" if len(cells) > most else ""
    return ", ".join(cells[:most]) + more


def _channels_summary(site: Site) -> str:
    """The overview's word on the channels: how many cells differ, in status and in graph."""
    if len(site.channels) < 2:
        return ""
    status = [d.cell for d in site.differences if d.status_differs]
    graph = [d.cell for d in site.differences if d.graph_differs]
    text = f"{len(status)} cells differ in status" + (f" ({_named(status)})" if status else "")
    text += f"; {len(graph)} exported a different graph" + (f" ({_named(graph)})" if graph else "")
    return f'<h2>Channels</h2><p>{e(text)}: <a href="channels.html">side by side</a>.</p>'


def _versions_table(site: Site) -> str:
    """Each channel's newest night's packages, a row a package (those that differ first)."""
    found = site.versions()
    names = list(found)
    packages = sorted({p for v in found.values() for p in v})
    differ = [p for p in packages if len({found[n].get(p) for n in names}) > 1]
    rows = (
        f"<tr><th>{e(p)}</th>{''.join(f'<td>{e(found[n].get(p) or chr(8212))}</td>' for n in names)}</tr>"
        for p in differ + [p for p in packages if p not in differ]
    )
    return "<h2>Versions</h2>" + table(["package", *names], rows, attrs=' id="versions"')


def _missing(site: Site) -> str:
    return "".join(f"<p class=missing>{e(n)}: {e(why)}</p>" for n, why in site.missing.items())


def channels_page(site: Site) -> str:
    names = [c.name for c in site.channels]
    if len(names) < 2:
        return page(
            "Channels", _missing(site) + "<p>one channel only: nothing to set side by side</p>"
        )
    dates = ", ".join(
        f"{c.name} {c.newest.date if c.newest else 'no night'}" for c in site.channels
    )
    statuses, graphs = [], []
    for d in site.differences:
        link = f'<td><a href="model/{slug(d.model)}.html">{e(d.cell)}</a></td>'
        if d.status_differs:
            statuses.append(f"<tr>{link}{''.join(status_cell(d.statuses[n]) for n in names)}</tr>")
        if d.graph_differs:
            prints = "".join(f"<td><code>{e((d.graphs[n] or '')[:12])}</code></td>" for n in names)
            graphs.append(f"<tr>{link}{prints}</tr>")
    body = _missing(site) + f"<p>The channels' newest nights: {e(dates)}.</p>"
    body += _versions_table(site)
    body += f"<h2>Status</h2><p>{len(statuses)} cells differ in status.</p>"
    body += table(["cell", *names], statuses, attrs=' id="differences"')
    body += f"<h2>Graph</h2><p>{len(graphs)} cells exported a different graph (fingerprint).</p>"
    body += table(["cell", *names], graphs, attrs=' id="graphs"')
    return page("Channels", body)


def _filter_controls(records: list[CellResult]) -> str:
    values: dict[str, set[str]] = {f: set() for f in FILTERS}
    for r in records:
        for f, v in _row_values(r).items():
            values[f].add(v)
    selects = []
    for f in FILTERS:
        options = "".join(f'<option value="{e(v)}">{e(v)}</option>' for v in sorted(values[f]) if v)
        selects.append(
            f'<label>{f} <select data-filter="{f}" name="{f}"><option value="">all</option>'
            f"{options}</select></label>"
        )
    search = '<label>search <input type="search" data-filter="q" name="q"></label>'
    return f'<form class="filters" id="filters">{"".join(selects)}{search}</form>'


def _row_values(r: CellResult) -> dict[str, str]:
    return {
        "family": r.cell.family,
        "task": r.task,
        "exporter": r.cell.exporter,
        "opset": str(r.cell.opset),
        "status": str(r.status),
    }


def cell_anchor(channel: str, label: str) -> str:
    """The id of a cell's timeline on its model's page (one per channel)."""
    return slug(f"{channel}/{label}")


def _sub_cell(s: SubCell, channel: str) -> str:
    """One sub-cell of the matrix: a link to its model's timeline, coloured by status,
    with the night its status began, and the filters' data."""
    r = s.result
    label = r.cell.label()
    attrs = "".join(f' data-{f}="{e(v)}"' for f, v in _row_values(r).items())
    attrs += f' data-q="{e(label.lower())}"'
    css = re.sub(r"[^a-z_]", "", str(r.status))
    other = f" <small>(other channel: {e(s.other)})</small>" if s.other else ""
    name = f"{e(s.name)} " if s.name else ""
    return (
        f'<a class="sub st-{css}"{attrs} title="{e(label)}" '
        f'href="../model/{slug(r.cell.model)}.html#{cell_anchor(channel, label)}">{name}<b>{e(r.status)}</b> '
        f"<small>since {e(s.since)}</small>{other}</a>"
    )


def suite_page(channel: Channel, suite: str, other: Mapping[str, CellResult]) -> str:
    """The newest night's model x exporter matrix of one suite, each matrix cell holding
    its sub-cells (the axes that vary: opset, shapes, ...), with the filters' data."""
    records = channel.suites.get(suite, [])
    m = suite_matrix(records, channel.since, other)
    rows = []
    for row in m.rows:
        tds = "".join(
            f"<td>{''.join(_sub_cell(s, channel.name) for s in row.by_exporter[x])}</td>"
            if x in row.by_exporter
            else '<td class="none">—</td>'
            for x in m.exporters
        )
        rows.append(
            f'<tr data-model="{e(row.model)}"><th><a href="../model/{slug(row.model)}.html">'
            f"{e(row.model)}</a></th><td>{e(row.family)}</td>{tds}</tr>"
        )
    shared = ", ".join(f"{a} {v}" for a, v in m.common.items())
    note = (
        "<p>One row per model, one column per exporter; each sub-cell is coloured by its "
        "status and names the night that status began"
        + (f"; every cell here: {e(shared)}" if shared else "")
        + ".</p>"
    )
    shown = f"{m.cells} of {m.cells} cells, {len(m.rows)} of {len(m.rows)} models"
    body = _filter_controls(records) + note + f'<p id="shown">{shown}</p>'
    if ways.architectures(records):
        link = f"../ways/{slug(channel.name + '/' + suite)}.html"
        body += f'<p><a href="{link}">Every way side by side</a>, where two or more exporters ran an architecture.</p>'
    body += table(["model", "family", *m.exporters], rows, attrs=' id="matrix"')
    return page(f"{suite} ({channel.name})", body, up="../", script=True)


def _artifact_links(r: CellResult, repros: Mapping[str, str], up: str = "../") -> str:
    links = [
        f'<a href="{up}{e(repros[name])}">{e(name)}</a>'
        for name in sorted(r.artifacts)
        if name in repros
    ]
    return " ".join(links) if links else "none kept"


def _timeline_section(
    channel: Channel, model: str, site: Site, repros: Mapping[str, Mapping[str, str]]
) -> str:
    out = f"<h2>{e(channel.name)}</h2>"
    for t in timelines(channel.per_model.get(model, {}), site.thresholds):
        strip = "".join(
            f'<span class="tick st-{e(s)}" title="{e(d)}: {e(s)}"></span>' for d, s in t.statuses
        )
        charts = "".join(
            f"<td>{band_chart(points, *_band(t.bands[label]))}<br>{_latest(points, t.bands[label])}</td>"
            for label, points in t.metrics.items()
        )
        last = t.last
        detail = ""
        if not last.status.passing:
            stage = last.divergence or last.stage
            detail = (
                f"<p>last failure: <code>{e(last.error_signature or last.status)}</code>; "
                f"stage or first divergent node: {e(stage)}; "
                f"files: {_artifact_links(last, repros.get(t.cell, {}))}</p>"
            )
        out += (
            f'<h3 id="{cell_anchor(channel.name, t.cell)}">{e(t.cell)}</h3><p class="timeline">{strip}</p>'
            + table(list(t.metrics), [f"<tr>{charts}</tr>"])
            + detail
        )
    return out


def _latest(points: list[Point], band: Band | None) -> str:
    """The newest value, and the band it is judged against ('' when never measured)."""
    if not points:
        return ""
    text = f"newest {points[-1].value:.3g}"
    if band is not None:
        text += f" (band {band.low:.3g}–{band.high:.3g})"
    return e(text)


def _band(band: Band | None) -> tuple[float | None, float | None]:
    return (band.low, band.high) if band is not None else (None, None)


def model_page(
    site: Site, model: str, repros: Mapping[str, Mapping[str, Mapping[str, str]]]
) -> str:
    body = "".join(_timeline_section(c, model, site, repros.get(c.name, {})) for c in site.channels)
    note = "<p>The shaded band: the compare's noise band from the previous nights.</p>"
    return page(f"Model {model}", note + body, up="../")


def _cluster_rows(clusters: list[Cluster], repros: Mapping[str, Mapping[str, str]]) -> list[str]:
    rows = []
    for c in clusters:
        cells = "<br>".join(e(x) for x in c.cells[:20]) or "gone"
        more = f"<br>… {len(c.cells) - 20} more" if len(c.cells) > 20 else ""
        files = ""
        if c.example is not None:
            kept = repros.get(c.example.cell.label(), {})
            files = _artifact_links(c.example, kept, up="")
        rows.append(
            f"<tr><td><code>{e(c.signature)}</code></td><td>{len(c.cells)} "
            f"{sparkline(c.counts)}</td><td>{e(c.first_seen)}</td><td>{cells}{more}</td>"
            f"<td>{files}</td></tr>"
        )
    return rows


def clusters_page(site: Site, repros: Mapping[str, Mapping[str, Mapping[str, str]]]) -> str:
    body = ""
    for c in site.channels:
        rows = _cluster_rows(c.clusters, repros.get(c.name, {}))
        head = ("signature", "cells now", "first seen", "cells", "repro")
        body += f"<h2>{e(c.name)}</h2>" + (table(head, rows) if rows else "<p>no failures</p>")
    return page("Failure clusters", body)


def coverage_page(site: Site) -> str:
    body = ""
    for c in site.channels:
        cov = c.coverage
        body += f"<h2>{e(c.name)}</h2>"
        if not cov.ops:
            body += "<p>no OpInfo cells in this channel's newest night</p>"
            continue
        trend = "".join(
            f"<li>{e(d)}: {e(f'{p[-1].value:.0f}%')} {sparkline(p, top=100.0)}</li>"
            for d, p in cov.trend.items()
        )
        rows = (
            f"<tr><th>{e(op)}</th>{''.join(status_cell(cov.status.get((op, d))) for d in cov.dtypes)}</tr>"
            for op in cov.ops
        )
        body += f"<ul>{trend}</ul>" + table(["op", *cov.dtypes], rows)
    return page("Op coverage", body)
