"""Render a report `Document` as markdown (report.md; GitHub renders its folded tables)."""

from __future__ import annotations

from html import escape

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


def render_markdown(doc: Document) -> str:
    lines = [doc.verdict, "", f"# {doc.heading}", ""]
    for section in doc.sections:
        lines += _section(section, 2)
    return "\n".join(lines).rstrip() + "\n"


def _section(section: Section, level: int) -> list[str]:
    title = section.title
    if section.code_title:
        title += " " + _code(section.code_title)
    lines = ["#" * min(level, 6) + " " + title, ""]
    for block in section.blocks:
        lines += _block(block, level)
    return lines


def _block(block: Block, level: int) -> list[str]:
    if isinstance(block, Section):
        return _section(block, level + 1)
    if isinstance(block, Paragraph):
        return [block.text, ""]
    if isinstance(block, Facts):
        return [f"- **{key}**: {_text(value)}" for key, value in block.items] + [""]
    if isinstance(block, Code):
        fence = "~~~~" if "```" in block.text else "```"
        return [fence, block.text, fence, ""]
    if isinstance(block, Image):
        return [f"![{block.title}]({block.path})", ""]
    if isinstance(block, Legend):
        return [_legend(block), ""]
    return _table(block)


def _legend(key: Legend) -> str:
    entries = [e.text + (f" = {e.title}" if e.title else "") for e in key.entries]
    return "Legend: " + " · ".join([*entries, *([key.note] if key.note else [])])


def _table(table: Table) -> list[str]:
    lines = [
        "| " + " | ".join(table.headers) + " |",
        "|" + "|".join("---" for _ in table.headers) + "|",
        *("| " + " | ".join(_text(cell) for cell in row) + " |" for row in table.rows),
        "",
    ]
    if table.folded:
        summary = f"<summary>{escape(table.folded)}</summary>"
        return ["<details>", summary, "", *lines, "</details>", ""]
    return lines


def _text(t: Text) -> str:
    text = t.text.replace("|", "\\|").replace("\n", " ")
    if t.code:
        text = _code(text)
    link = safe_link(t.link) if t.link else None
    return f"[{text}]({link})" if link else text


def _code(text: str) -> str:
    return f"`` {text} ``" if "`" in text else f"`{text}`"
