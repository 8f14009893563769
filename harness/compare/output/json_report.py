"""The comparison as JSON (compare.json): findings listed, unchanged cells only counted."""

from __future__ import annotations

from dataclasses import asdict

from harness.compare.comparison import Comparison
from harness.compare.findings import SEVERITIES
from harness.compare.tasks import task_changes
from harness.compare.ways import ways_side_by_side
from harness.store.runs import Run

JSON_SCHEMA = 1


def to_json(c: Comparison) -> dict[str, object]:
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
        "tasks": [t.to_dict() for t in task_changes(c)],
        "ways": None if (ways := ways_side_by_side(c)) is None else ways.to_dict(),
        "findings": [f.to_dict() for f in c.findings],
    }


def _run_json(run: Run) -> dict[str, object]:
    return {
        "run_id": run.run_id,
        "path": run.path,
        "started": run.started,
        "versions": run.manifest.to_dict()["versions"],
    }
