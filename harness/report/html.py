"""Render a report `Document` as one self-contained HTML page: inline CSS, images as data
URIs, no scripts, no network. Every string is escaped; links only where `safe_link` allows."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from harness.report.document import (
    Block,
    Code,
    Document,
    Facts,
    Image,
    Legend,
    Paragraph,
    Section,
    Table,
    Text,
    safe_link,
)
from harness.store.status import COLOURS

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em; color: #222; }
.verdict { font-size: 1.25em; font-weight: 600; padding: .5em .8em; background: #f3f3f3;
           border-left: 6px solid #0072B2; }
h1 { font-size: 1.5em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.6em; }
h3, h4 { margin-bottom: .4em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; white-space: nowrap; }
th { background: #f3f3f3; position: sticky; top: 0; }
td a { color: inherit; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; white-space: pre-wrap; font-size: 12px; }
code { font-size: 12px; }
ul.facts { list-style: none; padding-left: 0; } ul.facts b { display: inline-block; min-width: 7em; }
figure { margin: 1em 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 12px; }
.legend { line-height: 2; } .key { padding: 2px 6px; border-radius: 3px; margin-left: .6em; }
"""
# One rule per colour group of the status palette: the matrix plot uses the same colours.
_STATUS_CSS = "\n".join(f".s-{c.css} {{ background: {c.fill}; color: {c.text}; }}" for c in COLOURS)


def render_html(doc: Document, *, root: Path) -> str:
    """The page; `root` is the folder the document's image paths are relative to."""
    body = [
        f'<p class="verdict">{escape(doc.verdict)}</p>',
        f"<h1>{escape(doc.heading)}</h1>",
    ]
    for section in doc.sections:
        body += _section(section, 2, root)
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{escape(doc.verdict)}</title>\n<style>{_CSS}{_STATUS_CSS}\n</style>\n</head>\n<body>\n"
    )
    return head + "\n".join(body) + "\n</body>\n</html>\n"


def _section(section: Section, level: int, root: Path) -> list[str]:
    h = min(level, 6)
    title = escape(section.title)
    if section.code_title:
        title += f" <code>{escape(section.code_title)}</code>"
    out = [f"<h{h}>{title}</h{h}>"]
    for block in section.blocks:
        out += _block(block, level, root)
    return out


def _block(block: Block, level: int, root: Path) -> list[str]:
    if isinstance(block, Section):
        return _section(block, level + 1, root)
    if isinstance(block, Paragraph):
        return [f"<p>{escape(block.text)}</p>"]
    if isinstance(block, Facts):
        items = "".join(f"<li><b>{escape(k)}</b> {_text(v)}</li>" for k, v in block.items)
        return [f'<ul class="facts">{items}</ul>']
    if isinstance(block, Code):
        return [f"<pre>{escape(block.text)}</pre>"]
    if isinstance(block, Image):
        return [_image(block, root)]
    if isinstance(block, Legend):
        return [_legend(block)]
    return [_table(block)]


def _legend(key: Legend) -> str:
    swatches = " ".join(
        f'<span class="key {_status_class(e)}">{escape(e.text)}</span>'
        + (f" {escape(e.title)}" if e.title else "")
        for e in key.entries
    )
    note = f"<br>{escape(key.note)}" if key.note else ""
    return f'<p class="legend">Legend: {swatches}{note}</p>'


def _image(image: Image, root: Path) -> str:
    data = base64.b64encode((root / image.path).read_bytes()).decode("ascii")
    title = escape(image.title)
    return f'<figure><img alt="{title}" src="data:image/png;base64,{data}"><figcaption>{title}</figcaption></figure>'


def _table(table: Table) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in table.headers)
    ids = table.row_ids or ("",) * len(table.rows)
    rows = "\n".join(
        (f'<tr id="{escape(i)}">' if i else "<tr>") + "".join(_cell(c) for c in row) + "</tr>"
        for i, row in zip(ids, table.rows, strict=True)
    )
    out = f'<div class="scroll"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody></table></div>'
    if table.folded:
        return f"<details><summary>{escape(table.folded)}</summary>\n{out}\n</details>"
    return out


def _status_class(t: Text) -> str:
    """'s-export': the CSS class of the text's status colour ('' without a status)."""
    return f"s-{t.status.colour.css}" if t.status is not None else ""


def _cell(t: Text) -> str:
    attrs = f' class="{_status_class(t)}"' if t.status is not None else ""
    if t.title:
        attrs += f' title="{escape(t.title)}"'
    return f"<td{attrs}>{_text(t)}</td>"


def _text(t: Text) -> str:
    text = escape(t.text).replace("\n", "<br>")
    if t.code:
        text = f"<code>{text}</code>"
    link = safe_link(t.link) if t.link else None
    if link:
        text = f'<a href="{escape(link)}">{text}</a>'
    return text
