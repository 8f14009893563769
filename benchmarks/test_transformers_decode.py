"""The `transformers-decode` suite in full (issue 28): one generation step with a KV cache
for every causal-/seq2seq-LM head of the installed registry, its exporters (dynamo,
torchscript, transformers' own) at opset 18, plain and with the sliding-window patch,
through the real CLI on the embedded Ray instance; per architecture which exporter works,
and the cells that generate eager's 16 tokens (benchmarks/decode_figures.py).
Measured: the wall time (target 30 minutes on the 2-core development machine) with the
machine's load before and after, and the figures: causal-/seq2seq-LM types in the registry,
heads that build and step in eager with a cache, and per exporter and patch the cells that
exported, matched eager at the example shape, and matched at the prefill and the decode
step too; the ten most common failure signatures; median decode-step and prefill latency.

Set HARNESS_SWEEP_OUT=DIR to keep the run directory (e.g. to refresh
model_zoo/transformers/_decode_expected.csv from it with
`harness zoo expected DIR`).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.conftest import Figures, timed_sweep
from benchmarks.decode_figures import architectures, generation
from harness.stats import median
from harness.store import rundir as store
from harness.store.records import Record
from harness.store.status import Status
from harness.zoo.expected import raw_status
from model_zoo.transformers._decode_inventory import DECODE_INVENTORY
from model_zoo.transformers._inventory import read_inventory

TARGET_S = 1800.0
CELL_TIMEOUT_S = "300"


def _attempted(r: Record) -> bool:
    return r.status not in (Status.SKIPPED, Status.NOT_ATTEMPTED)


def _matched_example(r: Record) -> bool:
    first = [c for c in r.numerics.checks or () if "@" not in c.name]
    return bool(first) and all(c.ok for c in first)


def _matched_everywhere(r: Record) -> bool:
    """Right at the example shape, the prefill and the decode step, no dimension fixed."""
    shapes = {c.name.partition("@")[2] for c in r.numerics.checks or ()}
    return len(shapes) >= 3 and all(c.ok for c in r.numerics.checks or ()) and r.stage is None


def registry_figures(inventory: dict[str, Any]) -> dict[str, Any]:
    from transformers.models.auto import modeling_auto

    causal = set(modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    seq2seq = set(modeling_auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES)
    models = inventory["models"]
    return {
        "causal_lm_types": len(causal),
        "seq2seq_lm_types": len(seq2seq),
        "lm_types": len(causal | seq2seq),
        "heads": len(models),
        "built_with_cache": sum("reason" not in e for e in models.values()),
        "built_types": len({e["model_type"] for e in models.values() if "reason" not in e}),
    }


def run_figures(records: list[Record]) -> dict[str, Any]:
    figures: dict[str, Any] = {"cells": len(records)}
    figures["statuses"] = dict(Counter(str(r.status) for r in records).most_common())
    for exporter in sorted({r.exporter for r in records}):
        for patch in sorted({r.patch for r in records}):
            mine = [r for r in records if (r.exporter, r.patch) == (exporter, patch)]
            figures[f"{exporter}/{patch}"] = {
                "attempted": sum(_attempted(r) for r in mine),
                "exported": sum(r.export.seconds is not None for r in mine),
                "matched_example": sum(_matched_example(r) for r in mine),
                "matched_three_shapes": sum(_matched_everywhere(r) for r in mine),
            }
    failing = Counter(
        (r.exporter, r.error_signature or "?")
        for r in records
        if (s := raw_status(r)) is not None and not s.passing and _attempted(r)
    )
    figures["top_failures"] = [
        {"exporter": e, "signature": s, "cells": n} for (e, s), n in failing.most_common(10)
    ]
    for shape in ("decode_step", "prefill"):
        timed = [
            r.shape_latency[shape] for r in records if r.shape_latency and shape in r.shape_latency
        ]
        figures[shape] = {
            "cells": len(timed),
            "ort_p50_ms": median([t.ort_latency_ms.p50 for t in timed]) if timed else None,
            "eager_p50_ms": median([t.eager_latency_ms.p50 for t in timed]) if timed else None,
            "speedup": median([t.speedup for t in timed if t.speedup]) if timed else None,
        }
    return figures


def _table(f: dict[str, Any], wall_s: float, load: tuple[list[float], list[float]]) -> list[str]:
    lines = [
        f"registry: {f['causal_lm_types']} causal-LM and {f['seq2seq_lm_types']} seq2seq-LM types"
        f" ({f['lm_types']} types, {f['heads']} heads); {f['built_with_cache']} heads"
        f" ({f['built_types']} types) build and step in eager with a cache; {f['cells']} cells;"
        f" wall {wall_s / 60:.1f} min (target {TARGET_S / 60:.0f}); load average before"
        f" {load[0]}, after {load[1]}",
        "",
        "| exporter / patch | attempted | exported | right at the example shape | right at all three shapes |",
        "|---|---|---|---|---|",
    ]
    for key in sorted(k for k in f if "/" in k):
        x = f[key]
        lines.append(
            f"| {key} | {x['attempted']} | {x['exported']} | {x['matched_example']} | {x['matched_three_shapes']} |"
        )
    lines += ["", "| exporter | failure signature | cells |", "|---|---|---|"]
    lines += [
        f"| {t['exporter']} | {t['signature'][:140]} | {t['cells']} |" for t in f["top_failures"]
    ]
    for shape in ("decode_step", "prefill"):
        x = f[shape]
        lines.append(
            f"\n{shape}: {x['cells']} cells, median ORT p50 {x['ort_p50_ms']} ms, eager"
            f" {x['eager_p50_ms']} ms, median speedup {x['speedup']}"
        )
    return lines


def test_transformers_decode_suite(benchmark, figures: Figures, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = Path(os.environ.get("HARNESS_SWEEP_OUT") or tmp_path / "transformers-decode")
    wall, load_before, load_after = timed_sweep(
        benchmark,
        "run", "--suite", "transformers-decode", "--out", str(out),
        "--timeout", CELL_TIMEOUT_S,
        timeout=3 * TARGET_S,
    )  # fmt: skip
    records = store.read_records(out)
    result = {**registry_figures(read_inventory(DECODE_INVENTORY)), **run_figures(records)}
    result.update(wall_s=round(wall, 1), load_before=load_before, load_after=load_after)
    benchmark.extra_info.update(json.loads(json.dumps(result)))
    extra = ["", *architectures(records), "", *generation(records)]
    figures.add(
        "transformers-decode suite (its exporters @18, plain + sliding-window)",
        _table(result, wall, (load_before, load_after)) + extra,
    )
    assert len(records) == len({r.cell.key for r in records})
    assert result["built_with_cache"] >= 150
    assert wall < TARGET_S, f"the suite took {wall / 60:.1f} min"
