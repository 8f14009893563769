"""Op coverage as text: markdown (the report's section and `harness coverage`), JSON and CSV.
Pure functions of a `Coverage` (harness.coverage.matrix)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

from harness.coverage.matrix import (
    OK,
    STATE_MARK,
    STATE_TEXT,
    STATES,
    Column,
    ColumnSummary,
    Coverage,
    OpRow,
    OpState,
    build_coverage,
    usage_for,
)
from harness.store.markdown import md_code, md_text
from harness.store.records import Record


def _percent(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.0f}%"


def _md_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Headers as text; the rows' cells are markdown already (values escaped where made)."""
    lines = ["| " + " | ".join(md_text(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _summary_table(cov: Coverage) -> list[str]:
    summaries = cov.summaries() + cov.totals()  # OpInfos: per dtype, then over all dtypes
    sampled = any(s.samples_run is not None for s in summaries)
    headers = (
        "exporter@opset",
        "ops",
        *(STATE_TEXT[s] for s in STATES),
        "covered",
        "weighted by model usage",
        *(("samples matched",) if sampled else ()),
    )
    rows = [
        (
            md_text(s.column.label),
            str(s.ops),
            *(str(s.counts[k]) for k in STATES),
            _percent(s.covered_share),
            _percent(s.weighted_share),
            *((samples_text(s),) if sampled else ()),
        )
        for s in summaries
    ]
    return _md_table(headers, rows)


def samples_text(s: ColumnSummary) -> str:
    """'1234 of 1400 (88%)': samples that matched eager, of those that ran."""
    if s.samples_run is None or s.samples_matched is None:
        return "—"
    share = s.samples_matched / s.samples_run if s.samples_run else None
    return f"{s.samples_matched} of {s.samples_run} ({_percent(share)})"


def state_text(state: OpState) -> str:
    """A matrix cell: the state's mark, and for a partly matching OpInfo cell '3/8'."""
    if state.samples is not None and state.state != OK and state.samples[1]:
        return f"{STATE_MARK[state.state]} {state.samples[0]}/{state.samples[1]}"
    return STATE_MARK[state.state]


def _is_problem(row: OpRow) -> bool:
    return any(s.state != OK for s in row.states.values())


def _matrix_table(cov: Coverage, rows: Sequence[OpRow]) -> list[str]:
    headers = ("op", "models", *(c.label for c in cov.columns))
    body = [
        (
            md_code(row.op),
            "—" if row.usage is None else str(len(row.usage)),
            *(state_text(st) if (st := row.states.get(c)) else "—" for c in cov.columns),
        )
        for row in rows
    ]
    return _md_table(headers, body)


def _failure_lines(rows: Sequence[OpRow], columns: Sequence[Column]) -> list[str]:
    """Each problem op's signatures, with the columns that share each."""
    lines = []
    for row in rows:
        by_signature: dict[tuple[str, str], list[str]] = {}
        for c in columns:
            s = row.states.get(c)
            if s is not None and s.state != OK:
                by_signature.setdefault((s.state, s.signature or ""), []).append(c.label)
        for (state, signature), labels in by_signature.items():
            used = f"; used by {md_text(_few(row.usage))}" if row.usage else ""
            detail = f": {md_code(signature)}" if signature else ""
            where = md_text(", ".join(labels))
            lines.append(f"- {md_code(row.op)} {STATE_TEXT[state]} with {where}{detail}{used}")
    return lines


def _few(names: Iterable[str], n: int = 5) -> str:
    unique = sorted(set(names))
    return ", ".join(unique[:n]) + (f" and {len(unique) - n} more" if len(unique) > n else "")


def to_markdown(cov: Coverage, *, problems_only: bool = False) -> str:
    """Summary per exporter and opset, the op x column matrix, then each problem's error."""
    problems = [r for r in cov.rows if _is_problem(r)]
    shown = problems if problems_only else list(cov.rows)
    sampled = (
        " (OpInfos: of every sample; 'FAILS 3/8': 3 of 8 samples matched; an '(all dtypes)'"
        " row counts each OpInfo at each dtype once)"
        if "OpInfo" in cov.unit
        else ""
    )
    lines = [
        f"Op coverage from {cov.source}: {len(cov.rows)} {cov.unit}. 'models': how many zoo "
        f"models use the op; 'ok': exports and matches eager{sampled}; 'wrong': exports, wrong "
        "numbers; 'FAILS': export, checker or ONNX Runtime fails; '?': not shown (only in "
        "cells that failed for another reason, or skipped); '—': not in that column's cells.",
        "",
        *_summary_table(cov),
        "",
    ]
    if problems_only:
        lines += [
            f"{len(cov.rows) - len(problems)} ops export and match in every column; the others:",
            "",
        ]
    if shown:
        lines += [*_matrix_table(cov, shown), ""]
    failures = _failure_lines(problems, cov.columns)
    if failures:
        lines += ["Why:", "", *failures, ""]
    if cov.not_isolated:
        lines += [f"Not isolated as one-op models ({len(cov.not_isolated)}):", ""]
        lines += [f"- {md_code(e['op'])}: {md_text(e.get('reason'))}" for e in cov.not_isolated]
        lines += [""]
    return "\n".join(lines)


def to_json(cov: Coverage) -> dict[str, object]:
    return {
        "source": cov.source,
        "columns": [c.label for c in cov.columns],
        "summary": [
            {
                **_column_dict(s.column),
                "ops": s.ops,
                **{k: s.counts[k] for k in STATES},
                "covered_share": s.covered_share,
                "weighted_share": s.weighted_share,
                "samples_matched": s.samples_matched,
                "samples_run": s.samples_run,
            }
            for s in cov.summaries() + cov.totals()
        ],
        "ops": [
            {
                "op": row.op,
                "models": None if row.usage is None else list(row.usage),
                "kind": row.kind,
                "status": {
                    c.label: {
                        "state": s.state,
                        "signature": s.signature,
                        "cells": list(s.models),
                        **({"samples": list(s.samples)} if s.samples is not None else {}),
                    }
                    for c, s in sorted(row.states.items())
                },
            }
            for row in cov.rows
        ],
        "not_isolated": list(cov.not_isolated),
    }


def _column_dict(c: Column) -> dict[str, object]:
    return {
        "exporter": c.exporter,
        "opset": c.opset,
        "device": c.device,
        "variant": c.variant,
        **({"dtype": c.dtype} if c.dtype else {}),
    }


CSV_COLUMNS = (
    "op",
    "models",
    "exporter",
    "opset",
    "device",
    "variant",
    "state",
    "signature",
    "dtype",
    "samples_matched",
    "samples_run",
)


def to_csv(cov: Coverage) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in cov.rows:
        for c, s in sorted(row.states.items()):
            usage = "" if row.usage is None else str(len(row.usage))
            writer.writerow(
                [
                    row.op,
                    usage,
                    c.exporter,
                    c.opset,
                    c.device,
                    c.variant,
                    s.state,
                    s.signature or "",
                    c.dtype,
                    "" if s.samples is None else s.samples[0],
                    "" if s.samples is None else s.samples[1],
                ]
            )
    return out.getvalue()


def coverage_markdown(records: Sequence[Record]) -> str | None:
    """The coverage section for a run's report.md: the summary, the ops with a problem and
    why; None when the run holds no op data. Op cells' usage comes from the built-in inventory."""
    cov = build_coverage(records, usage=usage_for(records))
    if cov.is_empty:
        return None
    return to_markdown(cov, problems_only=True)
