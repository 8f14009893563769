"""The comparison as markdown: the verdict first, counts per family, the blocking table,
then the rest folded (GitHub renders it in a step summary or an issue). Every value from
the runs is escaped or code-spanned (harness.store.markdown): they are untrusted input."""

from __future__ import annotations

from collections.abc import Sequence

from harness.compare.comparison import Comparison
from harness.compare.findings import IMPROVEMENT, INFO, SEVERITIES, WARNING, Finding
from harness.compare.tasks import task_changes
from harness.compare.ways import WaysSideBySide, ways_side_by_side
from harness.store.markdown import md_code, md_link, md_text
from harness.store.runs import Run
from harness.store.ways import SHAPES, VERDICTS, WaySummary, label, tokens_text


def to_markdown(c: Comparison) -> str:
    """Verdict first, counts per family, the blocking table, then the rest folded."""
    moved = _packages_moved(c.baseline[-1], c.candidate)
    baseline = (
        _run_line(c.baseline[-1], moved)
        if c.mode == "run"
        else f"the last {len(c.baseline)} comparable runs (latest {_run_line(c.baseline[-1], moved)})"
    )
    lines = [
        _verdict_line(c),
        "",
        f"Candidate {_run_line(c.candidate, moved)} against {baseline}: {len(c.cells)} cells, {c.unchanged} unchanged.",
        *([f"Expected statuses: {md_code(c.expected_path)}."] if c.expected_path else []),
        *(f"> {md_text(note)}" for note in c.notes),
        "",
        *_counts_table(c),
        *_tasks_table(c),
        *_ways_tables(ways_side_by_side(c)),
    ]
    if c.blocking:
        lines += ["", "### Blocking", "", *findings_table(c.blocking, c.candidate.path)]
    lines += _details("Warnings", c.by_severity(WARNING), c.candidate.path)
    lines += _details("Improvements", c.by_severity(IMPROVEMENT), c.candidate.path)
    lines += _details("Info", c.by_severity(INFO), c.candidate.path)
    if c.not_compared:
        lines += [
            "",
            "Not compared (missing or not comparable, never a finding): "
            + ", ".join(f"{k}: {n}" for k, n in c.not_compared.items())
            + ".",
        ]
    return "\n".join(lines) + "\n"


def findings_table(findings: Sequence[Finding], run_dir: str | None = None) -> list[str]:
    lines = [
        "| cell | finding | baseline | candidate | ratio | threshold | evidence |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in findings:
        ratio = f"x{f.ratio:.3f}" if f.ratio is not None else ""
        threshold = (
            f"x{f.threshold:.3f}"
            if f.threshold is not None and f.ratio is not None
            else _fmt(f.threshold)
        )
        cells = [
            f.cell.label() if f.cell else "(run)",
            f.message,
            _fmt(f.baseline),
            _fmt(f.candidate),
            ratio,
            threshold,
            f.evidence or "",
        ]
        row = [md_text(x) for x in cells]
        row[-1] = "; ".join(x for x in (row[-1], _repro_link(f, run_dir)) if x)
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _repro_link(f: Finding, run_dir: str | None) -> str:
    """'minimal repro: [repro_min.py](RUN/artifacts/<cell>/repro_min.py) (reproduces, 600 -> 3
    nodes)', the path as written from the candidate's run directory."""
    if not f.repro:
        return ""
    target = f"{run_dir.rstrip('/')}/{f.repro}" if run_dir else f.repro
    note = f" ({md_text(f.repro_note)})" if f.repro_note else ""
    return f"minimal repro: [repro_min.py]({md_link(target)}){note}"


KEY_PACKAGES = ("torch", "onnxscript", "onnxruntime", "transformers")


def _packages_moved(baseline: Run, candidate: Run) -> tuple[str, ...]:
    """The other packages whose versions differ between the two sides (a variant's
    `--variant new=pkg==2`, a channel's pre-release), in the order the candidate names them."""
    old, new = baseline.versions(), candidate.versions()
    return tuple(
        k for k in new if k not in KEY_PACKAGES and isinstance(new[k], str) and new[k] != old.get(k)
    )


def _run_line(run: Run, moved: tuple[str, ...] = ()) -> str:
    v = run.versions()
    versions = ", ".join(f"{k} {v[k]}" for k in (*KEY_PACKAGES, *moved) if v.get(k))
    return md_code(run.run_id) + (f" ({md_text(versions)})" if versions else "")


def _verdict_line(c: Comparison) -> str:
    n = len(c.blocking)
    if n:
        return f"## ❌ harness compare: {n} blocking regression{'s' if n != 1 else ''}"
    return "## ✅ harness compare: nothing blocking"


def _counts_table(c: Comparison) -> list[str]:
    families = sorted({f.family for f in c.findings})
    lines = ["| family | " + " | ".join(SEVERITIES) + " |", "|---" * (len(SEVERITIES) + 1) + "|"]
    for fam in families:
        counts = [
            sum(1 for f in c.findings if f.family == fam and f.severity == s) for s in SEVERITIES
        ]
        lines.append(f"| {fam} | " + " | ".join(str(n) for n in counts) + " |")
    return lines if families else ["No findings."]


def _tasks_table(c: Comparison) -> list[str]:
    """Which tasks regressed (task heads' runs): pass rates before and after."""
    changes = task_changes(c)
    if not changes:
        return []
    lines = ["", "| task | baseline | candidate | regressed | fixed |", "|---|---|---|---|---|"]
    for t in changes:
        row = (t.task, t.before.text(), t.after.text(), str(t.regressed), str(t.fixed))
        lines.append("| " + " | ".join(md_text(x) for x in row) + " |")
    return lines


def _ways_tables(ways: WaysSideBySide | None) -> list[str]:
    """Every way side by side: each exporter's verdicts, baseline -> candidate, then the
    candidate's architectures way by way (folded)."""
    if ways is None:
        return []
    head = [
        "way",
        "architectures",
        *map(label, VERDICTS),
        "prefill vs fastest",
        "decode vs fastest",
    ]
    lines = ["", "### Every way side by side", "", _row(head), "|---" * len(head) + "|"]
    for s in ways.candidate:
        was = ways.baseline.get(s.exporter)
        cells = [
            s.exporter,
            _moved(was and was.architectures, s.architectures),
            *(_moved(was and _count(was, v), _count(s, v)) for v in VERDICTS),
            *(_moved(_median(was, k), _median(s, k)) for k in SHAPES),
        ]
        lines.append(_row(cells))
    rows = [
        _row([a.name if i == 0 else "", w.exporter, w.facts.status.value,
              *(tokens_text(g) for g in (w.facts.tokens, w.facts.batched, w.facts.genai)),
              _fmt(w.facts.graph_bytes), _fmt(w.facts.nodes),
              *(_ratio_text(w.facts.p50_ms.get(k), w.ratio.get(k)) for k in SHAPES)])
        for a in ways.architectures
        for i, w in enumerate(a.ways)
    ]  # fmt: skip
    detail = ["architecture", "way", "status", "tokens", "batched", "Generator", "graph bytes",
              "nodes", "prefill ms", "decode step ms"]  # fmt: skip
    return [*lines, "", f"<details><summary>Architectures ({len(ways.architectures)})</summary>",
            "", _row(detail), "|---" * len(detail) + "|", *rows, "", "</details>"]  # fmt: skip


def _count(found: WaySummary, verdict: str) -> str:
    return f"{found.holds[verdict]}/{found.checked[verdict]}" if found.checked[verdict] else ""


def _median(found: WaySummary | None, shape: str) -> str:
    return f"x{found.median_ratio[shape]:.2f}" if found and shape in found.median_ratio else ""


def _row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(md_text(str(c)) for c in cells) + " |"


def _moved(before: object, after: object) -> str:
    """'5/6' where nothing moved, '4/6 -> 5/6' where it did."""
    if before is None or str(before) == str(after):
        return str(after)
    return f"{before} -> {after}"


def _ratio_text(p50: float | None, ratio: float | None) -> str:
    if p50 is None:
        return ""
    return f"{p50:.3g}" + (f" (x{ratio:.2f})" if ratio is not None else "")


def _fmt(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _details(title: str, findings: Sequence[Finding], run_dir: str | None) -> list[str]:
    if not findings:
        return []
    return [
        "",
        f"<details><summary>{title} ({len(findings)})</summary>",
        "",
        *findings_table(findings, run_dir),
        "",
        "</details>",
    ]
