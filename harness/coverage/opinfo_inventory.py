"""The OpInfo inventory: which OpInfos of torch's op_db the `opinfo` suite runs, at which of
its dtypes, with how many CPU samples each (`model_zoo/opinfo/_inventory.json`).

Written on purpose by `harness coverage --refresh-inventory opinfo` (after a torch upgrade)
and committed, so that discovering the zoo never imports op_db. An OpInfo whose samples
cannot be built at a dtype is kept with the error: its cell is then `skipped` with the
reason, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from harness.coverage.opinfo_samples import dtype_of, op_db_index, reseed
from harness.coverage.opinfo_specs import INVENTORY_SCHEMA, REFRESH_COMMAND, model_base

DTYPES = ("float32", "float16", "int64", "bool")


def build_inventory(
    dtypes: Sequence[str] = DTYPES, *, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    entries = []
    for _key, op in sorted(op_db_index().items()):
        entry = _entry(op, dtypes)
        entries.append(entry)
        if progress is not None:
            counts = ", ".join(f"{d} {n}" for d, n in entry["samples"].items()) or "no dtype"
            problems = f"; {len(entry['problems'])} dtype(s) fail" if entry["problems"] else ""
            progress(f"{op.full_name}: {counts}{problems}")
    _check_unique(entries)
    return {
        "schema": INVENTORY_SCHEMA,
        "about": f"torch's OpInfos at the suite's dtypes, with their CPU sample counts; regenerate with `{REFRESH_COMMAND}`",
        "torch": torch.__version__,
        "dtypes": list(dtypes),
        "opinfos": entries,
    }


def _entry(op: Any, dtypes: Sequence[str]) -> dict[str, Any]:
    supported = op.supported_dtypes("cpu")
    samples: dict[str, int] = {}
    problems: dict[str, str] = {}
    for name in dtypes:
        dtype = dtype_of(name)
        if dtype not in supported:
            continue
        reseed()
        try:
            samples[name] = sum(1 for _ in op.sample_inputs("cpu", dtype, requires_grad=False))
        except Exception as exc:
            problems[name] = (
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[
                    :300
                ]
            )
    return {
        "name": op.name,
        "variant": op.variant_test_name,
        "aten_name": op.aten_name,
        "model": model_base(op.name, op.variant_test_name),
        "samples": samples,
        "problems": problems,
    }


def _check_unique(entries: list[dict[str, Any]]) -> None:
    seen: dict[str, str] = {}
    for e in entries:
        full = f"{e['name']}.{e['variant']}"
        if e["model"] in seen:
            raise ValueError(f"OpInfos {seen[e['model']]} and {full} get one zoo name {e['model']}")
        seen[e["model"]] = full


def write_inventory(inventory: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(inventory, indent=1) + "\n")
