"""Projections of a `Comparison`: markdown, JSON, JUnit XML, pytest-benchmark JSON.

Each is a pure function of the comparison (or of the candidate run's records); only
`write_outputs` and `append_step_summary` touch files.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.compare.core import (
    BLOCKING,
    EXPORTED_OK,
    IMPROVEMENT,
    INFO,
    SEVERITIES,
    WARNING,
    Comparison,
    Finding,
    Run,
)
from harness.store.records import Cell, Record

JSON_SCHEMA = 1

# -- markdown ---------------------------------------------------------------------------------


def _run_line(run: Run) -> str:
    v = run.versions()
    versions = ", ".join(f"{k} {v[k]}" for k in ("torch", "onnxscript", "onnxruntime") if v.get(k))
    return f"`{run.run_id}`" + (f" ({versions})" if versions else "")


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


def _cell_label(f: Finding) -> str:
    return f.cell.label() if f.cell else "(run)"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _fmt(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def findings_table(findings: Sequence[Finding]) -> list[str]:
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
            _cell_label(f),
            f.message,
            _fmt(f.baseline),
            _fmt(f.candidate),
            ratio,
            threshold,
            f.evidence or "",
        ]
        lines.append("| " + " | ".join(_md_escape(x) for x in cells) + " |")
    return lines


def _details(title: str, findings: Sequence[Finding]) -> list[str]:
    if not findings:
        return []
    return [
        "",
        f"<details><summary>{title} ({len(findings)})</summary>",
        "",
        *findings_table(findings),
        "",
        "</details>",
    ]


def to_markdown(c: Comparison) -> str:
    """Verdict first, counts per family, the blocking table, then the rest folded."""
    baseline = (
        _run_line(c.baseline[-1])
        if c.mode == "run"
        else f"the last {len(c.baseline)} comparable runs (latest {_run_line(c.baseline[-1])})"
    )
    lines = [
        _verdict_line(c),
        "",
        f"Candidate {_run_line(c.candidate)} against {baseline}: {len(c.cells)} cells, {c.unchanged} unchanged.",
        *([f"Expected statuses: `{c.expected_path}`."] if c.expected_path else []),
        *(f"> {note}" for note in c.notes),
        "",
        *_counts_table(c),
    ]
    if c.blocking:
        lines += ["", "### Blocking", "", *findings_table(c.blocking)]
    lines += _details("Warnings", c.by_severity(WARNING))
    lines += _details("Improvements", c.by_severity(IMPROVEMENT))
    lines += _details("Info", c.by_severity(INFO))
    if c.not_compared:
        lines += [
            "",
            "Not compared (missing or not comparable, never a finding): "
            + ", ".join(f"{k}: {n}" for k, n in c.not_compared.items())
            + ".",
        ]
    return "\n".join(lines) + "\n"


# -- JSON -------------------------------------------------------------------------------------


def _run_json(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "path": run.path,
        "started": run.started,
        "versions": run.manifest.get("versions") or {},
    }


def to_json(c: Comparison) -> dict[str, Any]:
    """Findings listed; unchanged cells only counted."""
    return {
        "schema": JSON_SCHEMA,
        "verdict": c.verdict,
        "mode": c.mode,
        "baseline": [_run_json(r) for r in c.baseline],
        "candidate": _run_json(c.candidate),
        "expected": c.expected_path,
        "thresholds": asdict(c.thresholds),
        "counts": {
            "cells": len(c.cells),
            "unchanged": c.unchanged,
            "by_severity": {s: len(c.by_severity(s)) for s in SEVERITIES},
            "not_compared": c.not_compared,
        },
        "notes": list(c.notes),
        "findings": [f.to_dict() for f in c.findings],
    }


# -- JUnit XML ----------------------------------------------------------------------------------


def _testcase(cell: Cell, findings: Sequence[Finding]) -> ET.Element:
    case = ET.Element(
        "testcase", classname=f"harness.{cell.exporter}.{cell.model}", name=cell.cell_id, time="0"
    )
    blocking = [f for f in findings if f.severity == BLOCKING]
    if blocking:
        failure = ET.SubElement(
            case, "failure", message="; ".join(f.message for f in blocking), type=blocking[0].kind
        )
        failure.text = "\n".join(
            f"[{f.kind}] {f.message}" + (f"\n  evidence: {f.evidence}" if f.evidence else "")
            for f in blocking
        )
    others = [f for f in findings if f.severity != BLOCKING]
    if others:
        ET.SubElement(case, "system-out").text = "\n".join(
            f"{f.severity}: [{f.kind}] {f.message}" for f in others
        )
    return case


def to_junit(c: Comparison) -> str:
    """One test case per cell (baseline and candidate), failing on its blocking findings."""
    by_cell: dict[tuple[Any, ...], list[Finding]] = {}
    for f in c.findings:
        by_cell.setdefault(f.cell.key if f.cell else (), []).append(f)
    cases = [_testcase(cell, by_cell.get(cell.key, [])) for cell in c.cells]
    failures = sum(1 for case in cases if case.find("failure") is not None)
    suite = ET.Element(
        "testsuite",
        name="harness compare",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    suite.extend(cases)
    run_wide = by_cell.get((), [])
    if run_wide:
        ET.SubElement(suite, "system-out").text = "\n".join(
            f"{f.severity}: [{f.kind}] {f.message}" for f in run_wide
        )
    root = ET.Element(
        "testsuites", name="harness compare", tests=str(len(cases)), failures=str(failures)
    )
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


# -- pytest-benchmark JSON ---------------------------------------------------------------------


def _quartiles(data: Sequence[float]) -> tuple[float, float]:
    """Q1 and Q3 as pytest-benchmark computes them (Wikipedia methods 2 and 3)."""
    d, n = sorted(data), len(data)
    if n == 1:
        return d[0], d[0]
    if n % 2 == 0:
        return statistics.median(d[: n // 2]), statistics.median(d[n // 2 :])
    m, q = n // 4, n % 4
    if q == 1:
        return 0.25 * d[m - 1] + 0.75 * d[m], 0.75 * d[3 * m] + 0.25 * d[3 * m + 1]
    return 0.75 * d[m] + 0.25 * d[m + 1], 0.25 * d[3 * m + 1] + 0.75 * d[3 * m + 2]


def benchmark_stats(data: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's `stats` block for samples in seconds (same definitions as its Stats)."""
    d, n = sorted(data), len(data)
    mean = statistics.mean(d)
    sd = statistics.stdev(d) if n > 1 else 0.0
    q1, q3 = _quartiles(d)
    iqr = q3 - q1
    low, high = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    iqr_out = sum(1 for x in d if x < low or x > high)
    sd_out = sum(1 for x in d if x < mean - sd or x > mean + sd)
    total = math.fsum(d)
    return {
        "min": d[0], "max": d[-1], "mean": mean, "stddev": sd, "rounds": n,
        "median": statistics.median(d), "iqr": iqr, "q1": q1, "q3": q3,
        "iqr_outliers": iqr_out, "stddev_outliers": sd_out, "outliers": f"{sd_out};{iqr_out}",
        "ld15iqr": next(x for x in d if x >= low) if n > 1 else d[0],
        "hd15iqr": [x for x in d if x <= high][-1] if n > 1 else d[0],
        "ops": n / total if total else 0, "total": total, "data": list(data), "iterations": 1,
    }  # fmt: skip


def _benchmark(run: Run, r: Record, metric: str, seconds: Sequence[float]) -> dict[str, Any]:
    cell = r.cell
    return {
        "group": metric,
        "name": f"{metric}[{cell.cell_id}]",
        "fullname": f"{run.manifest.get('suite') or 'harness'}::{metric}[{cell.cell_id}]",
        "params": {
            "model": cell.model,
            "exporter": cell.exporter,
            "opset": cell.opset,
            "device": cell.device,
            "dynamic": cell.dynamic,
            "variant": cell.variant,
        },
        "param": cell.cell_id,
        "extra_info": {
            "run_id": run.run_id,
            "family": r.family,
            "opset_actual": r.opset_actual,
            **{
                k: v
                for k, v in run.versions(r.variant).items()
                if k in ("torch", "onnxscript", "onnxruntime")
            },
        },
        "options": {"timer": "harness", "disable_gc": False, "warmup": True},
        "stats": benchmark_stats(seconds),
    }


def _benchmarks_of(run: Run, r: Record) -> list[dict[str, Any]]:
    out = []
    for metric, lat in (("ort_latency", r.ort_latency_ms), ("eager_latency", r.eager_latency_ms)):
        if lat is not None and (lat.samples or lat.p50):
            out.append(_benchmark(run, r, metric, [s / 1000 for s in (lat.samples or (lat.p50,))]))
    if r.export_s is not None:
        out.append(_benchmark(run, r, "export_time", [r.export_s]))
    return out


def _version(package: str, fallback: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return fallback


def to_pytest_benchmark(run: Run) -> dict[str, Any]:
    """The candidate's ok cells as pytest-benchmark JSON (seconds): ORT and eager latency
    samples and export time, readable by `pytest-benchmark compare` and github-action-benchmark."""
    hw, base = run.manifest.get("hardware") or {}, run.versions()
    harness = run.manifest.get("harness") or {}
    return {
        "machine_info": {
            "node": hw.get("node") or "", "processor": hw.get("cpu") or "", "machine": hw.get("machine") or "",
            "python_implementation": "CPython", "python_version": base.get("python") or "",
            "system": hw.get("system") or "", "cpu": {"brand_raw": hw.get("cpu") or "", "count": hw.get("cores")},
            "harness_hardware": hw, "harness_settings": run.manifest.get("settings") or {},
        },
        "commit_info": {
            "id": harness.get("git_sha") or "unknown", "time": None, "author_time": None, "dirty": False,
            "project": "onnx-export-harness", "branch": "(unknown)",
        },
        "benchmarks": [b for r in run.records if r.status in EXPORTED_OK for b in _benchmarks_of(run, r)],
        "datetime": run.manifest.get("finished") or run.started,
        "version": _version("pytest-benchmark", "5.0.0"),
    }  # fmt: skip


# -- files --------------------------------------------------------------------------------------

OUTPUT_FILES = ("compare.md", "compare.json", "junit.xml", "benchmark.json")


def write_outputs(c: Comparison, out_dir: Path) -> list[Path]:
    """Write compare.md, compare.json, junit.xml and benchmark.json into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = [
        to_markdown(c),
        json.dumps(to_json(c), indent=2, allow_nan=False) + "\n",
        to_junit(c),
        json.dumps(to_pytest_benchmark(c.candidate), indent=2, allow_nan=False) + "\n",
    ]
    paths = [out_dir / name for name in OUTPUT_FILES]
    for path, text in zip(paths, texts, strict=True):
        path.write_text(text)
    return paths


def append_step_summary(markdown: str, env: Mapping[str, str] = os.environ) -> Path | None:
    """Append to `$GITHUB_STEP_SUMMARY` when set (GitHub Actions renders it on the run page)."""
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a") as f:
        f.write(markdown + "\n")
    return Path(target)
