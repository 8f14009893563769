"""The document model: a report is built once as blocks and rendered to markdown and to HTML
(harness.report.markdown, harness.report.html), so both always say the same thing.

Also how values read in it: `fmt` (missing is "—", never 0), and which link targets a
document may hold (`safe_link`: a records file is input, not trusted code).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from harness.store.status import Status

MISSING = "—"
FOLD_ABOVE_ROWS = 40  # a longer table starts folded: 400 models must not bury what follows


@dataclass(frozen=True)
class Text:
    """A piece of text: a table cell, a fact's value."""

    text: str
    status: Status | None = None  # colours a table cell in HTML
    link: str | None = None  # relative to the report; rendered only where `safe_link` allows
    title: str | None = None  # hover text in HTML
    code: bool = False


@dataclass(frozen=True)
class Table:
    headers: tuple[str, ...]
    rows: tuple[tuple[Text, ...], ...]
    folded: str | None = None  # a summary line: the table starts folded
    row_ids: tuple[str, ...] | None = None  # HTML anchors


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Facts:
    items: tuple[tuple[str, Text], ...]


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Image:
    title: str
    path: str  # relative to the report


@dataclass(frozen=True)
class Legend:
    """What the status marks mean: a line in markdown, coloured swatches in HTML."""

    entries: tuple[Text, ...]  # text: mark and word; title: what it means
    note: str | None = None


@dataclass(frozen=True)
class Section:
    title: str
    blocks: tuple[Block, ...]
    code_title: str | None = None  # shown after the title as code (an error signature)


Block = Paragraph | Facts | Table | Code | Image | Legend | Section


@dataclass(frozen=True)
class Document:
    verdict: str
    heading: str
    sections: tuple[Section, ...]


def sub(title: str, *blocks: Block | None) -> Section:
    """A section of the blocks that are there."""
    return Section(title, tuple(b for b in blocks if b is not None))


def table(
    headers: Sequence[str],
    rows: Sequence[tuple[Text, ...]],
    *,
    noun: str = "rows",
    row_ids: Sequence[str] | None = None,
    fold_above: int = FOLD_ABOVE_ROWS,
) -> Table:
    """A table that starts folded ('450 rows') when it is longer than `fold_above` rows."""
    folded = f"{len(rows)} {noun}" if len(rows) > fold_above else None
    ids = tuple(row_ids) if row_ids is not None else None
    return Table(tuple(headers), tuple(rows), folded=folded, row_ids=ids)


# == values ====================================================================================


def fmt(value: float | None, unit: str = "") -> str:
    """Three significant figures or so; None is '—' (missing), never 0."""
    if value is None:
        return MISSING
    magnitude = abs(value)
    if magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}"
    elif magnitude >= 0.1 or magnitude == 0:
        text = f"{value:.2f}"
    else:
        text = f"{value:.2g}"
    return text + unit


def percent(share: float | None) -> str:
    return MISSING if share is None else f"{share:.0%}"


def safe_link(target: str) -> str | None:
    """`target` where it may be a link: an http(s) URL, or a path relative to the report that
    stays inside its folder. None for anything else (javascript:, data:, file:, absolute
    paths, '..' out of the folder, control characters), which renders as plain text. The
    checks see the target percent-decoded (until nothing changes): browsers read
    `%2e%2e/` as `../`."""
    decoded = _percent_decoded(target)
    if not target or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in decoded):
        return None
    parts = urlsplit(decoded)
    if parts.scheme or parts.netloc:
        return target if parts.scheme in ("http", "https") and parts.netloc else None
    path = decoded.replace("\\", "/")  # browsers read a backslash as a slash
    first = path.split("/", 1)[0]
    if path.startswith("/") or ":" in first:  # absolute, or a scheme urlsplit did not see
        return None
    normal = posixpath.normpath(path)
    return None if normal == ".." or normal.startswith("../") else target


def _percent_decoded(text: str) -> str:
    while (decoded := unquote(text)) != text:
        text = decoded
    return text
