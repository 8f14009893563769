"""The `transformers` suite in full (issue 16): every model type of the installed registry,
both exporters at opset 18, through the real CLI on the embedded Ray instance. Measured:
the wall time (the target is 60 minutes on the 2-core development machine) with the
machine's load before and after, and the sweep's figures: model types in the registry,
built, run in eager, exported per exporter, numerically right, and the most common export
error signatures.

Set HARNESS_SWEEP_OUT=DIR to keep the run directory (e.g. to refresh
model_zoo/transformers/_expected.csv from it with `harness zoo expected DIR`),
and HARNESS_SWEEP_BASELINE=DIR to compare its verdicts cell for cell with an earlier sweep's
(e.g. one made by an earlier version of the harness).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.conftest import Figures, timed_sweep
from benchmarks.overhead import overhead
from harness.store import rundir as store
from harness.store.records import Record
from harness.store.status import Status
from harness.zoo.expected import raw_status
from model_zoo.transformers._inventory import read_inventory

EXPORTERS = ("dynamo", "torchscript")
TARGET_S = 20 * 60.0
CELL_TIMEOUT_S = "300"


def _ran_in_eager(r: Record) -> bool:
    """The cell got past building the model and its eager reference."""
    if r.status in (Status.SKIPPED, Status.NOT_ATTEMPTED):
        return False
    return not (r.status is Status.HARNESS_ERROR and str(r.stage) in ("build", "reference"))


def _exported(r: Record) -> bool:
    """The exporter call returned a model (whatever the checks after it found)."""
    return r.export.seconds is not None


def _numerically_ok(r: Record) -> bool:
    return bool(r.numerics.checks) and all(c.ok for c in r.numerics.checks or ())


def sweep_figures(records: list[Record], inventory: dict[str, Any]) -> dict[str, Any]:
    """The closing note's figures, from a run of the suite."""
    models = inventory["models"]
    figures: dict[str, Any] = {
        "registry": len(models),
        "built": sum("reason" not in e for e in models.values()),
        "cells": len(records),
        "statuses": dict(Counter(str(r.status) for r in records).most_common()),
    }
    for exporter in EXPORTERS:
        mine = [r for r in records if r.exporter == exporter]
        figures[exporter] = {
            "ran_in_eager": sum(_ran_in_eager(r) for r in mine),
            "exported": sum(_exported(r) for r in mine),
            "numerically_ok": sum(_numerically_ok(r) for r in mine),
            "passed_all_checks": sum(r.status in (Status.OK, Status.XPASS) for r in mine),
        }
    failures = Counter(
        (r.exporter, r.error_signature or "?")
        for r in records
        if raw_status(r) is Status.EXPORT_FAILED
    )
    figures["top_export_errors"] = [
        {"exporter": e, "signature": s, "cells": n} for (e, s), n in failures.most_common(10)
    ]
    return figures


def verdict_changes(before: list[Record], after: list[Record]) -> list[str]:
    """The cells whose verdict (status before expectations, stage, error type) differs
    between two sweeps, or which only one of them has (a timeout counts like any other)."""

    def verdicts(records: list[Record]) -> dict[tuple[Any, ...], tuple[str, str, str]]:
        return {r.cell.key: (str(raw_status(r)), str(r.stage), r.error_type or "") for r in records}

    old, new = verdicts(before), verdicts(after)
    return [
        f"{' '.join(map(str, key[:2]))}: {old.get(key)} -> {new.get(key)}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def _table(f: dict[str, Any], wall_s: float, load: tuple[list[float], list[float]]) -> list[str]:
    lines = [
        f"registry {f['registry']} model types; {f['built']} build and run in eager (probe);"
        f" {f['cells']} cells; wall {wall_s / 60:.1f} min (target {TARGET_S / 60:.0f});"
        f" load average before {load[0]}, after {load[1]}",
        "",
        "| exporter | ran in eager | exported | numerically ok | passed every check |",
        "|---|---|---|---|---|",
    ]
    for e in EXPORTERS:
        x = f[e]
        lines.append(
            f"| {e} | {x['ran_in_eager']} | {x['exported']} | {x['numerically_ok']} | {x['passed_all_checks']} |"
        )
    lines += ["", "| exporter | export error signature | cells |", "|---|---|---|"]
    lines += [
        f"| {t['exporter']} | {t['signature'][:120]} | {t['cells']} |"
        for t in f["top_export_errors"]
    ]
    return lines


def test_transformers_sweep(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = Path(os.environ.get("HARNESS_SWEEP_OUT") or tmp_path / "transformers")
    wall, load_before, load_after = timed_sweep(
        benchmark,
        "run", "--suite", "transformers", "--opsets", "18", "--out", str(out),
        "--timeout", CELL_TIMEOUT_S,
        timeout=3 * TARGET_S,
    )  # fmt: skip
    records = store.read_records(out)
    result = sweep_figures(records, read_inventory())
    result.update(wall_s=round(wall, 1), load_before=load_before, load_after=load_after)
    result.update(overhead(out))
    lines = _table(result, wall, (load_before, load_after))
    if baseline := os.environ.get("HARNESS_SWEEP_BASELINE"):
        changed = verdict_changes(store.read_records(Path(baseline)), records)
        result["verdicts_changed"] = changed
        lines += ["", f"Verdicts against {baseline}: {len(records) - len(changed)} of "
                  f"{len(records)} cells the same; changed: {changed or 'none'}"]  # fmt: skip
    benchmark.extra_info.update(json.loads(json.dumps(result)))
    figures.add("transformers suite, full sweep (dynamo + torchscript @18)", lines)
    assert len(records) == len({r.cell.key for r in records}) == 2 * result["registry"]
    assert result["built"] >= 400
    assert wall < TARGET_S, f"the sweep took {wall / 60:.1f} min"
