"""The OpInfo inventory: which OpInfos of torch's op_db the `opinfo` suite runs, at which of
its dtypes, with how many CPU samples each (`model_zoo/opinfo/_inventory.json`).

Written on purpose by `harness zoo refresh opinfo` (after a torch upgrade)
and committed, so that discovering the zoo never imports op_db. An OpInfo whose samples
cannot be built at a dtype is kept with the error: its cell is then `skipped` with the
reason, never silently dropped.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from harness.errors import UsageError
from harness.zoo.generated.opinfo_samples import dtype_of, op_db_index, reseed
from harness.zoo.generated.opinfo_specs import (
    BUILTIN_OPINFO_INVENTORY,
    INVENTORY_SCHEMA,
    REFRESH_COMMAND,
    OpInfoEntry,
    OpInfoInventory,
    model_base,
)

if TYPE_CHECKING:
    from torch.testing._internal.opinfo.core import OpInfo

DTYPES = ("float32", "float16", "int64", "bool")


def refresh(
    names: Sequence[str] = (),
    *,
    out: Path | None = None,
    merge: bool = False,
    say: Callable[[str], None] = print,
) -> str:
    """List torch's OpInfos (only those `names` select, where given: `add`, `nn.functional.*`,
    `max.binary`) and write the inventory to `out` (default: the opinfo zoo's own); with
    `merge`, the other OpInfos of `out` stay. The summary line."""
    path = out or BUILTIN_OPINFO_INVENTORY
    if names and not merge and out is None:
        raise UsageError(
            f"refreshing only some OpInfos would drop the others from {path}: add --merge, or --out PATH"
        )
    inventory = build_inventory(names=names, progress=say)
    if merge and path.is_file():
        inventory = merged(json.loads(path.read_text()), inventory)
    write_inventory(inventory, path)
    entries = inventory["opinfos"]
    cells = sum(len(e["samples"]) + len(e["problems"]) for e in entries)
    failing = sum(len(e["problems"]) for e in entries)
    return (
        f"{len(entries)} OpInfos, {cells} (OpInfo, dtype) entries at {', '.join(inventory['dtypes'])}"
        + (f" ({failing} whose samples cannot be built: skipped cells)" if failing else "")
        + f" -> {path}"
    )


def merged(old: OpInfoInventory, new: OpInfoInventory) -> OpInfoInventory:
    """`new` with the OpInfos of `old` it does not list, in op_db's order (name, variant)."""
    fresh = {e["model"] for e in new["opinfos"]}
    kept = [e for e in old.get("opinfos", ()) if e["model"] not in fresh]
    entries = sorted([*kept, *new["opinfos"]], key=lambda e: (e["name"], e["variant"]))
    return {**new, "opinfos": entries}


def build_inventory(
    dtypes: Sequence[str] = DTYPES,
    *,
    names: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> OpInfoInventory:
    entries = []
    for _key, op in _chosen(names):
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


def _chosen(names: Sequence[str]) -> list[tuple[tuple[str, str], OpInfo]]:
    """op_db's OpInfos in order, or those a name or glob selects (`name` or `name.variant`);
    a name selecting none is an error."""
    ops = sorted(op_db_index().items())
    if not names:
        return ops
    for name in names:
        if not any(_selects(name, op) for _key, op in ops):
            raise UsageError(f"--ops {name}: no OpInfo of this torch's op_db is named so")
    return [(key, op) for key, op in ops if any(_selects(name, op) for name in names)]


def _selects(name: str, op: OpInfo) -> bool:
    full = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
    return fnmatch.fnmatchcase(op.name, name) or fnmatch.fnmatchcase(full, name)


def _entry(op: OpInfo, dtypes: Sequence[str]) -> OpInfoEntry:
    supported = op.supported_dtypes("cpu")  # type: ignore[no-untyped-call]  # torch's OpInfo is untyped
    samples: dict[str, int] = {}
    problems: dict[str, str] = {}
    for name in dtypes:
        dtype = dtype_of(name)
        if dtype not in supported:
            continue
        reseed()
        try:
            made = op.sample_inputs("cpu", dtype, requires_grad=False)  # type: ignore[no-untyped-call]
            samples[name] = len(list(made))
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


def _check_unique(entries: list[OpInfoEntry]) -> None:
    seen: dict[str, str] = {}
    for e in entries:
        full = f"{e['name']}.{e['variant']}"
        if e["model"] in seen:
            raise ValueError(f"OpInfos {seen[e['model']]} and {full} get one zoo name {e['model']}")
        seen[e["model"]] = full


def write_inventory(inventory: OpInfoInventory, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(inventory, indent=1) + "\n")
