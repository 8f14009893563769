"""Render a report `Document` as markdown (report.md; GitHub renders its folded tables).

Every piece of text goes through harness.store.markdown: the document holds values from
records (model names, error messages, signatures, reasons), and none may become markup."""

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
from harness.store.markdown import md_code, md_fence, md_link, md_text


def render_markdown(doc: Document) -> str:
    lines = [md_text(doc.verdict), "", f"# {md_text(doc.heading)}", ""]
    for section in doc.sections:
        lines += _section(section, 2)
    return "\n".join(lines).rstrip() + "\n"


def _section(section: Section, level: int) -> list[str]:
    title = md_text(section.title)
    if section.code_title:
        title += " " + md_code(section.code_title)
    lines = ["#" * min(level, 6) + " " + title, ""]
    for block in section.blocks:
        lines += _block(block, level)
    return lines


def _block(block: Block, level: int) -> list[str]:
    if isinstance(block, Section):
        return _section(block, level + 1)
    if isinstance(block, Paragraph):
        return [md_text(block.text), ""]
    if isinstance(block, Facts):
        return [f"- **{md_text(key)}**: {_text(value)}" for key, value in block.items] + [""]
    if isinstance(block, Code):
        fence = md_fence(block.text)
        return [fence, block.text, fence, ""]
    if isinstance(block, Image):
        return [f"![{md_text(block.title)}]({md_link(block.path)})", ""]
    if isinstance(block, Legend):
        return [_legend(block), ""]
    return _table(block)


def _legend(key: Legend) -> str:
    entries = [e.text + (f" = {e.title}" if e.title else "") for e in key.entries]
    notes = [key.note] if key.note else []
    return "Legend: " + " · ".join(md_text(e) for e in [*entries, *notes])


def _table(table: Table) -> list[str]:
    lines = [
        "| " + " | ".join(md_text(h) for h in table.headers) + " |",
        "|" + "|".join("---" for _ in table.headers) + "|",
        *("| " + " | ".join(_text(cell) for cell in row) + " |" for row in table.rows),
        "",
    ]
    if table.folded:
        summary = f"<summary>{escape(table.folded)}</summary>"
        return ["<details>", summary, "", *lines, "</details>", ""]
    return lines


def _text(t: Text) -> str:
    text = md_code(t.text) if t.code else md_text(t.text)
    link = safe_link(t.link) if t.link else None
    return f"[{text}]({md_link(link)})" if link else text
