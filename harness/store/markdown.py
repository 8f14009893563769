"""Values from a run directory as markdown (report.md, compare.md, the coverage tables):
a run directory is untrusted input, and GitHub renders these files and the job summary,
so every value taken from a record or a manifest is literal text there, never markup.

`md_text` backslash-escapes what markdown would read as markup (HTML tags and entities,
links and images, emphasis, code spans, table pipes); `md_code` makes a code span no
backtick inside can close; `md_fence` a code block no line inside can close; `md_link` a
link destination nothing inside can end early.
"""

from __future__ import annotations

import re
from urllib.parse import quote

# Markup characters (`<` opens every HTML tag and autolink, so `>` needs none), and an
# underscore that is not between two letters or digits (one inside a word, as in
# `tiny_mlp`, never starts or ends emphasis: CommonMark 6.2).
_MARKUP = re.compile(r"[\\`*\[\]<&|~]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")
_BACKTICKS = re.compile(r"`+")
# What a link destination keeps as is: no space, parenthesis, quote, bracket or angle.
_LINK_SAFE = "/:#?&=%~+@!$,;-._"


def _one_line(value: object) -> str:
    return " ".join(str(value).splitlines())


def md_text(value: object) -> str:
    """`value` as literal text on one line (safe in a table cell, a heading, a list)."""
    return _MARKUP.sub(lambda m: "\\" + m.group(0), _one_line(value))


def md_code(value: object) -> str:
    """`value` as a code span on one line: fenced by more backticks than it holds in a
    row, its pipes escaped (GitHub splits table cells on them even in code)."""
    text = _one_line(value).replace("|", "\\|")
    fence = "`" * (1 + max((len(m) for m in _BACKTICKS.findall(text)), default=0))
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fence(value: object) -> str:
    """A fence for a code block holding `value`: longer than any run of backticks in it."""
    return "`" * max(3, 1 + max((len(m) for m in _BACKTICKS.findall(str(value))), default=0))


def md_link(target: str) -> str:
    """A link destination (already judged safe to link to) percent-encoded where markdown
    would end it or split it: spaces, parentheses, quotes, brackets."""
    return quote(target, safe=_LINK_SAFE)
