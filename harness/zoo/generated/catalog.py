"""The generated zoos by name (`harness zoo refresh NAME`) and the expected failures they
keep beside them, rewritten from a run (`harness zoo expected RUN_DIR`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from pathlib import Path

from harness.errors import UsageError
from harness.store.rundir import RunDirError, read_manifest, read_records
from harness.zoo.expected import ZooExpected
from harness.zoo.expected_file import ExpectedFileError

# What `harness zoo refresh NAME` rewrites: each one's inventory in model_zoo/.
REFRESHABLE = ("ops", "opinfo", "transformers", "transformers-decode", "transformers-tasks")


def expected_files() -> tuple[ZooExpected, ...]:
    """Every generated zoo that keeps its expected failures as data (model_zoo/*/_expected.csv)."""
    from harness.zoo.generated import transformers
    from harness.zoo.generated.opinfo_specs import EXPECTED

    return (EXPECTED, *transformers.expected_files())


def update_expected(
    run_dir: Path, *, path: Path | None = None, families: Collection[str] | None = None
) -> list[str]:
    """Rewrite the expected failures of each zoo whose cells the run holds (only `families`,
    where given; into `path` instead of the zoo's own file, where the run holds one zoo);
    a line per file written. A run that is not one, or that holds no such zoo, is a
    UsageError."""
    try:
        read_manifest(run_dir)
        records = read_records(run_dir)
    except RunDirError as exc:
        raise UsageError(str(exc)) from None
    known = [z for z in expected_files() if families is None or z.family in families]
    present = {r.family for r in records}
    zoos = [z for z in known if z.family in present]
    if not zoos:
        names = ", ".join(z.family for z in known)
        raise UsageError(f"{run_dir} holds no cell of a zoo that keeps expected failures ({names})")
    if path is not None and len(zoos) > 1:
        names = ", ".join(z.family for z in zoos)
        raise UsageError(f"--expected names one file, and {run_dir} holds cells of {names}")
    lines = []
    for zoo in zoos:
        target = dataclasses.replace(zoo, path=path) if path is not None else zoo
        try:
            before, after = target.update(records)
        except ExpectedFileError as exc:
            raise UsageError(str(exc)) from None
        lines.append(f"wrote {target.path}: {after} rows ({before} before) from {run_dir}")
    return lines
