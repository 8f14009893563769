"""From the command line to a validated run plan: which cells, with which settings, into
which directory. Pure apart from reading suite and zoo files; every problem is a
`UsageError` raised before anything is written."""

from __future__ import annotations

import math
import os
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from harness.errors import UsageError
from harness.plan.matrix import Matrix, ModelRef, expand
from harness.plan.suites import (
    DEFAULT_EXPORTERS,
    DEFAULT_OPSETS,
    Suite,
    load_suite,
    validate_devices,
    validate_exporters,
    validate_opsets,
    validate_values,
)
from harness.store.axes import LIST_AXES, Axis
from harness.store.lock import LOCK
from harness.store.options import RunOptions as RunOptions
from harness.store.options import Shapes
from harness.store.protocol import Protocol
from harness.store.records import Cell
from harness.zoo import ModelSpec
from harness.zoo.discovery import Zoo, discover, with_checkpoints


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    run_dir: Path
    options: RunOptions
    suite_name: str | None
    matrix: Matrix
    specs: dict[str, ModelSpec]
    protocol: Protocol
    zoo_problems: tuple[Any, ...] = field(default=())
    variants: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Cells the run directory already holds a record of (a resumed run): not run again.
    recorded: frozenset[tuple[Any, ...]] = frozenset()

    @property
    def pending(self) -> list[Cell]:
        """The cells still to run, in matrix order."""
        return [c for c in self.matrix.cells if c.key not in self.recorded]


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def make_plan(options: RunOptions, *, run_id: str | None = None, resume: bool = False) -> RunPlan:
    _check_numbers(options)
    if options.keep_graphs not in (None, "run") and (
        problem := unwritable(Path(options.keep_graphs))
    ):
        raise UsageError(f"--keep-graphs {options.keep_graphs}: {problem}")
    zoo, named = with_checkpoints(discover([Path(p) for p in options.zoo]), options.models)
    suite = load_suite(options.suite) if options.suite else None
    specs = _models(named, options, zoo, suite)
    matrix = _matrix(options, suite, specs)
    if not matrix.cells:
        raise UsageError(_why_empty(options, zoo))
    run_id = run_id or new_run_id()
    run_dir = Path(options.out) if options.out else Path("results") / run_id
    if not resume:
        _check_out_dir(run_dir, run_id)
    return RunPlan(
        run_id=run_id,
        run_dir=run_dir,
        options=options,
        suite_name=suite.name if suite else None,
        matrix=matrix,
        specs={s.name: s for s in specs},
        protocol=(suite.protocol if suite else Protocol()).overridden(options.protocol),
        zoo_problems=zoo.problems,
        variants=parse_variants(options.variants),
    )


def _matrix(options: RunOptions, suite: Suite | None, specs: list[ModelSpec]) -> Matrix:
    """The cells of every axis: the flags' values, else the suite's, else the defaults."""
    exporters = (
        validate_exporters(options.exporters, "--exporters")
        if options.exporters
        else (suite.exporters if suite else DEFAULT_EXPORTERS)
    )
    devices = (
        validate_devices(options.devices, "--devices")
        if options.devices
        else (suite.devices if suite else ("cpu",))
    )
    opsets = _opsets_for(options, suite, exporters)
    dynamic = (
        options.dynamic
        if options.dynamic is not None
        else (suite.dynamic if suite else Shapes.STATIC)
    )
    variants = parse_variants(options.variants)
    refs = [ModelRef(s.name, s.family, s.dynamic_shapes is not None) for s in specs]
    matrix = expand(
        refs,
        exporters,
        lambda e: opsets[e],
        devices,
        dynamic=dynamic,
        variants=("base", *variants),
        axes={a.name: _list_values(a, options, suite) for a in LIST_AXES},
    )
    return matrix


def _list_values(axis: Axis[Any], options: RunOptions, suite: Suite | None) -> tuple[Any, ...]:
    """A list axis's values: the flag's, else the suite's, else its default."""
    if named := options.values(axis):
        return validate_values(axis, named, str(axis.flag))
    return suite.values(axis) if suite else (axis.default,)


def _check_numbers(options: RunOptions) -> None:
    """A NaN compares false with everything: `--timeout nan` would never fire."""
    if options.threads < 1:
        raise UsageError("--threads must be at least 1")
    if not (math.isfinite(options.timeout_s) and options.timeout_s > 0):
        raise UsageError(f"--timeout must be a positive number of seconds, not {options.timeout_s}")
    memory = options.max_memory_gb
    if memory is not None and not (math.isfinite(memory) and memory > 0):
        raise UsageError(f"--max-memory-gb must be a positive number, not {memory}")
    if options.local and options.address:
        raise UsageError("--local runs without Ray: it cannot join --address")
    if options.local and options.variants:
        raise UsageError("--variant needs Ray's runtime environments: drop --local")


def unwritable(folder: Path) -> str | None:
    """Why `folder` cannot be written to, or made where it is missing; None where it can."""
    if folder.exists() and not folder.is_dir():
        return "exists and is not a directory"
    existing = next(p for p in (folder, *folder.absolute().parents) if p.exists())
    if not existing.is_dir():
        return f"{existing} is not a directory"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable" + (
            "" if existing == folder else f" (to make {folder})"
        )
    return None


def parse_variants(values: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """`--variant old=onnxscript==0.6.2,onnx==1.19` -> {"old": ("onnxscript==0.6.2", ...)}."""
    variants: dict[str, tuple[str, ...]] = {}
    for value in values:
        name, sep, specs = value.partition("=")
        name = name.strip()
        if not sep or not name or not specs.strip():
            raise UsageError(f"--variant {value!r} must look like NAME=PIP_SPEC[,PIP_SPEC...]")
        if name == "base" or name in variants:
            raise UsageError(f"--variant name {name!r} is taken (base is the default variant)")
        if not re.fullmatch(r"[a-z0-9_.\-]+", name):
            raise UsageError(f"--variant name {name!r} must match [a-z0-9_.-]+")
        variants[name] = tuple(s.strip() for s in specs.split(",") if s.strip())
        for spec in variants[name]:
            if not _pip_installable(spec):
                raise UsageError(
                    f"--variant {value!r}: {spec!r} is not something pip installs (a"
                    " requirement such as onnxscript==0.6.2, a URL, or a wheel or sdist path)"
                )
    return variants


def _pip_installable(spec: str) -> bool:
    """A PEP 508 requirement, a URL (git+https://...), or a package file's path: what a
    Ray runtime_env's `pip` list takes. Anything else fails only inside Ray, per cell."""
    if "://" in spec or spec.endswith((".whl", ".tar.gz", ".zip")):
        return True
    try:
        Requirement(spec)
    except InvalidRequirement:
        return False
    return True


def _models(
    patterns: tuple[str, ...], options: RunOptions, zoo: Zoo, suite: Any
) -> list[ModelSpec]:
    """The suite's models (or the --zoo paths', or the whole zoo's), narrowed by --models;
    a model --models names exactly runs even where the suite does not hold it (it was
    dropped without a word: "40 models" for 41 named)."""
    if suite is not None:
        chosen = zoo.select(suite.models)
    elif options.zoo:
        roots = [str(Path(p).resolve()) for p in options.zoo]
        chosen = [m for m in zoo.models.values() if any(m.source.startswith(r) for r in roots)]
    elif patterns:
        chosen = list(zoo.models.values())
    else:
        raise UsageError("nothing to run: give --suite NAME, --zoo PATH or --models GLOB")
    if not patterns:
        return chosen
    wanted = {m.name for m in zoo.select(patterns)}
    named = [zoo.get(p) for p in patterns if p in zoo.models]
    chosen = [m for m in chosen if m.name in wanted]
    chosen += [m for m in named if m not in chosen]
    if not chosen:
        raise UsageError(f"--models {','.join(options.models)} selects no model of this suite")
    return chosen


def _opsets_for(
    options: RunOptions, suite: Any, exporters: tuple[str, ...]
) -> dict[str, tuple[int, ...]]:
    if options.opsets:
        return {e: validate_opsets(list(options.opsets), e, "--opsets") for e in exporters}
    if suite is not None:  # an exporter the suite does not name takes the suite's `*` opsets
        return {e: validate_opsets(list(suite.opsets_for(e)), e, suite.source) for e in exporters}
    return {e: validate_opsets(list(DEFAULT_OPSETS), e, "default opsets") for e in exporters}


def _check_out_dir(run_dir: Path, run_id: str) -> None:
    """Refuse to mix two runs in one directory: `--resume` finishes an existing one."""
    if problem := unwritable(run_dir):
        raise UsageError(f"--out {run_dir}: {problem}")
    if not run_dir.exists():
        return
    if all(p.name == LOCK for p in run_dir.iterdir()):  # empty, or a run killed at its start
        return
    manifest = run_dir / "manifest.json"
    if manifest.is_file():
        raise UsageError(
            f"--out {run_dir} already holds another run; finish it with `harness run --resume {run_dir}` "
            "or choose another directory"
        )
    raise UsageError(
        f"--out {run_dir} is a non-empty directory that is not a run; choose another directory"
    )


def _why_empty(options: RunOptions, zoo: Zoo) -> str:
    """An empty matrix is a usage error (exit 2): a CI job would read a 0-cell run as green."""
    if options.zoo and zoo.problems:
        first = zoo.problems[0]
        return (
            f"nothing to run: no model loaded from --zoo {', '.join(options.zoo)}; "
            f"{len(zoo.problems)} file(s) failed to import, first {first.source}: {first.error}"
        )
    return "nothing to run: the selection gives an empty matrix (no model, exporter or opset left)"
