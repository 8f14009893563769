"""The `opinfo` family's zoo entries: one per (OpInfo, dtype), from the committed inventory
(`model_zoo/opinfo/_inventory.json`, written by `harness zoo refresh opinfo`) and the expected failures beside it (`_expected.csv`, the Expect grammar).

Discovery stays cheap: reading the two files makes the entries; torch's op_db is imported
only when a cell builds its samples (harness.zoo.generated.opinfo_samples). A worker re-imports
a zoo file for every cell, so the files are parsed once per process.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from harness.zoo import expected_file
from harness.zoo.discovery import BUILTIN_ZOO
from harness.zoo.expect import Expect
from harness.zoo.expected import ZooExpected
from harness.zoo.spec import ModelSpec, Sample, SampleSet

if TYPE_CHECKING:
    import torch


class OpInfoEntry(TypedDict):
    """One OpInfo of the inventory: its names, zoo name, and per dtype its CPU sample count
    or why its samples cannot be built."""

    name: str
    variant: str
    aten_name: str
    model: str
    samples: dict[str, int]
    problems: NotRequired[dict[str, str]]


class OpInfoInventory(TypedDict):
    schema: int
    about: str
    torch: str
    dtypes: list[str]
    opinfos: list[OpInfoEntry]


OPINFO_FAMILY = "opinfo"
BUILTIN_OPINFO_INVENTORY = BUILTIN_ZOO / "opinfo" / "_inventory.json"
BUILTIN_OPINFO_EXPECTED = BUILTIN_ZOO / "opinfo" / "_expected.csv"
INVENTORY_SCHEMA = 1
REFRESH_COMMAND = "harness zoo refresh opinfo"
EXPECTED = ZooExpected(
    BUILTIN_OPINFO_EXPECTED,
    OPINFO_FAMILY,
    header="""\
# Expected failures of the opinfo zoo (model_zoo/opinfo/), per (OpInfo, dtype) entry and
# exporter: a cell that fails with this status at this stage is `xfail` (with the reason);
# one that passes is `xpass` (the op got fixed: rewrite this file). Same grammar as
# expected/status.csv (`*` globs; the most specific row wins; `match`: a regular expression
# the error must contain; `expires`: an ISO date). Reasons may be edited by hand: a rewrite
# keeps a row's reason while its status and stage stay.
# Rewrite from a run with: harness zoo expected RUN_DIR
""",
)
MAX_SAMPLES_ENV = "HARNESS_OPINFO_MAX_SAMPLES"  # samples per cell; 0: all of them
DEFAULT_MAX_SAMPLES = 10
# torch.testing._internal (op_db) imports these: `pip install -e ".[opinfo]"`. The last is
# op_db itself (~3 s to import): a worker's zygote imports it once, before it forks each
# cell (harness.runtime.zygote), so no cell pays for it.
REQUIRES = ("expecttest", "hypothesis", "torch.testing._internal.common_methods_invocations")


def model_base(name: str, variant: str) -> str:
    """The zoo name of an OpInfo (before its `.dtype`): 'opinfo.nn.functional.conv2d',
    'opinfo.nn.functional.interpolate-nearest-exact'. Zoo names are [a-z0-9_.-]: an
    upper-case letter becomes '_' and the letter ('mT' -> 'm_t'); '-' (in no OpInfo name)
    starts the variant. The real names stay in the entry's metadata."""

    def lower(text: str) -> str:
        return "".join(f"_{c.lower()}" if c.isupper() else c for c in text)

    return f"opinfo.{lower(name)}" + (f"-{lower(variant)}" if variant else "")


def full_name(name: str, variant: str) -> str:
    """torch's own name for an OpInfo with its variant ('nn.functional.interpolate.nearest-exact')."""
    return f"{name}.{variant}" if variant else name


def max_samples() -> int:
    value = os.environ.get(MAX_SAMPLES_ENV, "")
    return int(value) if value.strip() else DEFAULT_MAX_SAMPLES


@functools.cache
def _read_inventory(path: str, mtime: float) -> OpInfoInventory:
    inventory: OpInfoInventory = json.loads(Path(path).read_text())
    if inventory.get("schema") != INVENTORY_SCHEMA:
        raise ValueError(
            f"{path}: OpInfo inventory schema {inventory.get('schema')!r}, this harness reads "
            f"{INVENTORY_SCHEMA}; regenerate it with `{REFRESH_COMMAND}`"
        )
    return inventory


def read_inventory(path: Path) -> OpInfoInventory:
    return _read_inventory(str(path), path.stat().st_mtime)


@functools.cache
def _read_expected(path: str, mtime: float) -> tuple[Expect, ...]:
    return expected_file.read(Path(path)).rows


def read_expected(path: Path) -> tuple[Expect, ...]:
    return _read_expected(str(path), path.stat().st_mtime) if path.is_file() else ()


def specs(inventory_path: Path, expected_path: Path | None = None) -> list[ModelSpec]:
    """Every (OpInfo, dtype) of the inventory as a zoo entry, with its expectations. Made
    once per process and files' state: a worker reloads the zoo file for every cell, and
    these entries hold no class of their own (a sample's module class is made per sample)."""
    if not inventory_path.is_file():
        return []
    expected = (str(expected_path), _mtime(expected_path)) if expected_path else None
    return list(_specs(str(inventory_path), _mtime(inventory_path), expected))


def _mtime(path: Path) -> float:
    return path.stat().st_mtime if path.is_file() else 0.0


@functools.cache
def _specs(
    inventory_path: str, mtime: float, expected: tuple[str, float] | None
) -> tuple[ModelSpec, ...]:
    inventory = read_inventory(Path(inventory_path))
    rows = read_expected(Path(expected[0])) if expected else ()
    exact: dict[str, list[Expect]] = {}
    globs = [e for e in rows if any(c in e.model for c in "*?[")]
    for e in rows:
        if e not in globs:
            exact.setdefault(e.model, []).append(e)
    found = []
    for entry in inventory["opinfos"]:
        for dtype in inventory["dtypes"]:
            if dtype in entry["samples"] or dtype in entry.get("problems", {}):
                name = f"{entry['model']}.{dtype}"
                expect = [*exact.get(name, ()), *_globbed(globs, name)]
                found.append(spec(entry, dtype, expect))
    return tuple(found)


def _globbed(globs: Iterable[Expect], name: str) -> list[Expect]:
    return [e for e in globs if fnmatch.fnmatchcase(name, e.model)]


def spec(entry: OpInfoEntry, dtype: str, expect: list[Expect]) -> ModelSpec:
    """The zoo entry of one OpInfo at one dtype."""
    name, variant = entry["name"], entry["variant"]
    count = entry["samples"].get(dtype)
    samples = functools.partial(_samples, name, variant, dtype)
    group = name.rsplit(".", 1)[0] if "." in name else "torch"
    return ModelSpec(
        name=f"{entry['model']}.{dtype}",
        family=OPINFO_FAMILY,
        build=functools.partial(_first_build, samples),
        example_inputs=functools.partial(_first_inputs, samples),
        tags=(OPINFO_FAMILY, dtype, group),
        expect=tuple(expect),
        description=(
            f"OpInfo {full_name(name, variant)} at {dtype}: "
            + (f"{count} samples" if count is not None else "samples not built at inventory")
            + ", each exported, run and compared alone"
        ),
        samples=samples,
        requires=REQUIRES,
        metadata={
            "opinfo": name,
            "variant": variant,
            "dtype": dtype,
            "aten_name": entry.get("aten_name") or None,
            "samples": count,
        },
    )


def _samples(name: str, variant: str, dtype: str) -> SampleSet:
    from harness.zoo.generated.opinfo_samples import sample_set

    return sample_set(name, variant, dtype, max_samples=max_samples())


def _first(samples: Callable[[], SampleSet]) -> tuple[Callable[[], torch.nn.Module], Sample]:
    """The entry's first sample alone, as an ordinary model (`build`, `example_inputs`)."""
    first = next(((s.build, s) for s in samples().samples if s.build is not None), None)
    if first is None:
        raise LookupError("this OpInfo has no sample at this dtype")
    return first


def _first_build(samples: Callable[[], SampleSet]) -> torch.nn.Module:
    build, _ = _first(samples)
    return build()


def _first_inputs(samples: Callable[[], SampleSet]) -> tuple[object, ...]:
    _, first = _first(samples)
    return first.inputs
