"""Nights of history made from real runs: each simulated run directory is a real run's
manifest and records (artifacts copied) under a new run id and date, its models repeated
under new names to reach a suite's size, and per-night edits (a status that flips, a
version that moves, a hostile name). The browser tests and benchmarks/test_publish.py
build their histories from these."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from harness.history import db as history

Edit = Callable[[int, dict[str, Any]], dict[str, Any]]
FIRST_NIGHT = date(2026, 8, 1)
# The nightly's CPU suites and their cells (`harness list --suite NAME`, x exporters x opsets
# x shapes): smoke 3 x 2 x 3, vision 11 x 2 x 3 x 2, transformers 822 x 2, decode 234 x 2.
NIGHTLY_SUITES = {"smoke": 18, "vision": 132, "transformers": 1644, "transformers-decode": 468}


def real_records(run_dirs: Sequence[Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Every record of the real runs, with the run directory it came from."""
    return [
        (d, json.loads(line))
        for d in run_dirs
        for line in (d / "records.jsonl").read_text().splitlines()
        if line.strip()
    ]


def _trim(record: dict[str, Any], keep: int) -> dict[str, Any]:
    for name in ("ort_latency_ms", "eager_latency_ms"):
        if isinstance(record.get(name), dict):
            record[name] = {**record[name], "samples": record[name]["samples"][:keep]}
    return record


def write_night(
    source: Sequence[tuple[Path, dict[str, Any]]],
    out: Path,
    *,
    night: int,
    suite: str | None,
    cells: int | None = None,
    edit: Edit | None = None,
    versions: dict[str, str] | None = None,
    keep_samples: int | None = None,
    hour: int = 3,
) -> Path:
    """One simulated run directory: night `night` (days after FIRST_NIGHT) of `suite`, the
    source records repeated to `cells` records (copy k of a model is `MODEL_k`)."""
    first_dir = source[0][0]
    day = FIRST_NIGHT + timedelta(days=night)
    run_id = f"{day:%Y%m%d}-{hour:02d}{night % 60:02d}00-{(suite or 'x')[:4]}"
    run_dir = out / run_id
    run_dir.mkdir(parents=True)
    for src in sorted({d for d, _ in source}):
        if (src / "artifacts").is_dir():
            shutil.copytree(src / "artifacts", run_dir / "artifacts", dirs_exist_ok=True)
    manifest = json.loads((first_dir / "manifest.json").read_text())
    started = f"{day.isoformat()}T{hour:02d}:17:00+00:00"
    manifest.update(run_id=run_id, started=started, finished=started, suite=suite)
    manifest["versions"]["base"].update(versions or {})
    for node in (manifest.get("cluster") or {}).get("nodes") or ():
        if node.get("versions"):  # recorded per node (the base environment there)
            node["versions"].update(versions or {})
    lines = []
    for j in range(cells or len(source)):
        record = dict(source[j % len(source)][1])
        copy = j // len(source)
        if copy:
            record["model"] = f"{record['model']}_{copy:04d}"
        record["run_id"] = run_id
        if keep_samples is not None:
            record = _trim(record, keep_samples)
        lines.append(json.dumps(edit(night, record) if edit else record))
    manifest["cells"] = len(lines)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "records.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def failed_like(record: dict[str, Any], failure: dict[str, Any]) -> dict[str, Any]:
    """`record` with `failure`'s status, stage and error (a real failure's fields)."""
    fields = ("status", "stage", "error_type", "error_message", "error_signature", "artifacts")
    return {**record, **{k: failure.get(k) for k in fields}}


def build_history(
    db: Path, source: Sequence[tuple[Path, dict[str, Any]]], out: Path, *, nights: int, **kw: Any
) -> list[Path]:
    """`nights` simulated nights of one suite added to the database `db`."""
    dirs = [write_night(source, out, night=i, **kw) for i in range(nights)]
    history.add_runs(db, dirs)
    return dirs
