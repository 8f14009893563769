"""Adding facts found after a run to its records (a minimal repro made later): the file is
written anew beside the old one and renamed over it, so that a reader sees either the old
records or the new ones, never half of each. Lines of cells not amended are kept byte for
byte (a torn last line too), and every cell still has exactly one record."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.store.records import Record
from harness.store.rundir import records_path


def amend_records(run_dir: Path, amended: Mapping[tuple[Any, ...], Record]) -> int:
    """Replace the records of the cells in `amended` (by `Cell.key`); returns how many."""
    path = records_path(run_dir)
    if path.is_symlink():
        raise OSError(f"{path} is a symbolic link: not rewritten")
    lines = path.read_text().splitlines(keepends=True)
    replaced = 0
    out = []
    for line in lines:
        record = _parsed(line)
        if record is not None and record.cell.key in amended:
            out.append(amended[record.cell.key].to_json() + "\n")
            replaced += 1
        else:
            out.append(line)
    tmp = path.with_name(path.name + ".amend")
    with tmp.open("w") as f:
        f.writelines(out)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return replaced


def _parsed(line: str) -> Record | None:
    if not line.strip():
        return None
    try:
        return Record.from_json(line)
    except Exception:  # a torn line stays as it was
        return None
