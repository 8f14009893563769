"""A bisection's answer as JSON (`bisect.json`) and markdown (`bisect.md`): pure functions of
the `BisectResult`; only `write_outputs` touches files."""

from __future__ import annotations

import json
from pathlib import Path

from harness.bisect.result import SCHEMA, BisectResult, CellAnswer, Tried
from harness.bisect.search import Verdict

JSON_FILE = "bisect.json"
MARKDOWN_FILE = "bisect.md"


def _verdict(v: Verdict) -> dict[str, str]:
    return {"version": v.version, "judgement": str(v.judgement), "reason": v.reason}


def _tried(t: Tried) -> dict[str, object]:
    return {
        "label": t.label,
        "purpose": t.purpose,
        "requirements": list(t.requirements),
        "run": t.run,
        "variant": t.variant,
        "skipped": t.skipped,
        "installs": list(t.installs),
        "seconds": t.seconds,
        "environment": None if t.environment is None else _environment(t),
        "verdicts": {cell: _verdict(v) for cell, v in t.verdicts.items()},
    }


def _environment(t: Tried) -> dict[str, object]:
    assert t.environment is not None
    e = t.environment
    return {"path": e.path, "kept": e.kept, "seconds": e.seconds}


def _cell(c: CellAnswer) -> dict[str, object]:
    o = c.outcome
    return {
        "package": c.package,
        "finding": {"family": c.target.family, "kind": c.target.kind, "message": c.target.message},
        "first_bad": o.first_bad if o else None,
        "last_good": o.last_good if o else None,
        "candidates": list(o.candidates) if o and o.first_bad is None else [],
        "blame": c.blame,
        "also_reproduced_by": list(c.also),
        "verdicts": [_verdict(v) for v in c.verdicts],
        "evidence": {
            "last_good_record": c.evidence.last_good,
            "first_bad_record": c.evidence.first_bad,
            "op_count_diff": c.evidence.op_count_diff,
            "paired": c.evidence.paired,
            "failing_pass": c.evidence.failing_pass,
        },
    }


def to_json(r: BisectResult) -> dict[str, object]:
    head = r.headline()
    return {
        "schema": SCHEMA,
        "package": r.package,
        "first_bad": head.outcome.first_bad if head and head.outcome else None,
        "last_good": head.outcome.last_good if head and head.outcome else None,
        "fix": r.fix,
        "answered": r.answered,
        "failing_pass": head.evidence.failing_pass if head else None,
        "finding": r.criterion,
        "moves": [{"package": m.package, "good": m.good, "bad": m.bad} for m in r.moves],
        "tried": [_tried(t) for t in r.tried],
        "cells": {c.label: _cell(c) for c in r.cells},
        "note": r.note,
        "command": list(r.command),
        "wall_s": r.wall_s,
    }


def _escape(text: object) -> str:
    """A table cell: no pipes, no line breaks, no HTML tag (the text may come from an error;
    `<` opens a tag, a lone `>` is text)."""
    return (
        str(text).replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|").replace("\n", " ")
    )


def _row(*cells: object) -> str:
    return "| " + " | ".join(_escape(c) for c in cells) + " |"


def headline(r: BisectResult) -> str:
    head = r.headline()
    moves = ", ".join(f"{m.package} {m.good} -> {m.bad}" for m in r.moves)
    if head is None or head.outcome is None:
        return f"## harness bisect ({moves}): no {'fix' if r.fix else 'first bad version'} found"
    where = f"; failing pass: {head.evidence.failing_pass}" if head.evidence.failing_pass else ""
    if r.fix:
        return (
            f"## harness bisect ({moves}): fixed in {r.package} {head.outcome.last_good}"
            f" (last bad {head.outcome.first_bad}){where}"
        )
    return (
        f"## harness bisect ({moves}): first bad {r.package} {head.outcome.first_bad}"
        f" (last good {head.outcome.last_good}){where}"
    )


def _cells_table(r: BisectResult) -> list[str]:
    lines = [
        "| cell | finding | package | last good | first bad | evidence |",
        "|---|---|---|---|---|---|",
    ]
    for c in r.cells:
        o = c.outcome
        first = (
            o.first_bad if o and o.first_bad else "one of " + ", ".join(o.candidates) if o else "-"
        )
        lines.append(
            _row(
                c.label,
                c.target.message,
                c.package or "-",
                o.last_good if o else "-",
                first,
                _evidence_text(c),
            )
        )
    return lines


def _evidence_text(c: CellAnswer) -> str:
    parts = []
    if c.package is None or not c.outcome:
        parts.append(c.blame)
    e = c.evidence
    graphs = [(r or {}).get("graph_fingerprint") for r in (e.last_good, e.first_bad)]
    if all(graphs) and graphs[0] != graphs[1]:
        parts.append(f"graph {str(graphs[0])[:12]} -> {str(graphs[1])[:12]}")
    if e.op_count_diff:
        parts.append(
            "ops " + ", ".join(f"{op} {a or 0}->{b or 0}" for op, (a, b) in e.op_count_diff.items())
        )
    if e.paired and "ratio" in e.paired:
        p = e.paired
        parts.append(
            f"timed together: x{p['ratio']:.3f} ({p['low']:.3f}..{p['high']:.3f}, {p['pairs']} pairs)"
        )
    if e.first_bad and e.first_bad.get("status") != (e.last_good or {}).get("status"):
        parts.append(f"{(e.last_good or {}).get('status')} -> {e.first_bad.get('status')}")
    if e.failing_pass:
        parts.append(f"failing pass: {e.failing_pass}")
    if c.also:
        parts.append("also reproduced by " + ", ".join(c.also) + " alone")
    return "; ".join(parts)


def _tried_table(r: BisectResult) -> list[str]:
    envs = any(t.environment for t in r.tried)
    lines = [
        "| # | set | purpose | verdicts | run | seconds |" + (" environment |" if envs else ""),
        "|---|---|---|---|---|---|" + ("---|" if envs else ""),
    ]
    for i, t in enumerate(r.tried, 1):
        verdicts = ", ".join(sorted({str(v.judgement) for v in t.verdicts.values()})) or "-"
        if t.skipped:
            verdicts = f"skipped: {t.skipped}"
        run = f"{t.run} ({t.variant})" if t.run and t.variant else t.run or "-"
        cells = [i, " ".join(t.requirements), t.purpose, verdicts, run, f"{t.seconds:g}"]
        lines.append(_row(*cells, *([_env_text(t)] if envs else [])))
    return lines


def _env_text(t: Tried) -> str:
    e = t.environment
    if e is None:
        return "-"
    return f"{Path(e.path).name} ({'kept' if e.kept else f'made, {e.seconds:g} s'})"


def to_markdown(r: BisectResult) -> str:
    lines = [headline(r), ""]
    if r.note:
        lines += [r.note, ""]
    if r.cells:
        lines += [*_cells_table(r), ""]
    tries = sum(1 for t in r.tried if t.purpose == "bisect")
    lines += [
        f"{len(r.tried)} package sets tried ({tries} bisection steps), finding `{r.criterion}`,"
        f" {r.wall_s:g} s.",
        "",
        *_tried_table(r),
        "",
    ]
    return "\n".join(lines)


def write_outputs(r: BisectResult, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / JSON_FILE, out / MARKDOWN_FILE]
    paths[0].write_text(json.dumps(to_json(r), indent=2, allow_nan=False, default=str) + "\n")
    paths[1].write_text(to_markdown(r))
    return paths
