"""A cell's temporary files in a folder of its own, which its zygote removes once the cell
has ended, however it ended.

A cell writes its graph (at real size, gigabytes of external data), the exporters' and
builders' working files and whatever a model's own code puts in the temp folder. A cell
that finishes removes its own; one killed at its timeout or its memory ceiling, or one that
crashed, never gets to, and every such cell of a nightly left its files in /tmp until the
disk was full. So the zygote makes the folder before it forks, the child makes it the
temp folder of its process and of what it starts (`tempfile`, `TMPDIR`), and the zygote
removes it when the child and its process group are gone. The node's locks are not a
cell's: the child keeps them where every other process finds them."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.cell import node

PREFIX = "harness-cell-"


@contextlib.contextmanager
def folder() -> Iterator[Path | None]:
    """In the zygote: a new folder for one child, removed after the block; None where the
    temp folder takes none (full, say): the cell then meets that itself, in its record."""
    try:
        made = Path(tempfile.mkdtemp(prefix=PREFIX))
    except OSError:
        yield None
        return
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


def enter(made: Path | None) -> None:
    """In the child: `made` is where this process and what it starts put temporary files."""
    if made is None:
        return
    os.environ.setdefault(node.FOLDER_ENV, str(node.default_folder()))
    tempfile.tempdir = str(made)
    os.environ["TMPDIR"] = str(made)
