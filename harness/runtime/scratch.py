"""A cell's temporary files in a folder of its own, which its zygote removes once the cell
has ended, however it ended.

A cell writes its graph (at real size, gigabytes of external data), the exporters' and
builders' working files and whatever a model's own code puts in the temp folder. A cell
that finishes removes its own; one killed at its timeout or its memory ceiling, or one that
crashed, never gets to, and every such cell of a nightly left its files in /tmp until the
disk was full. So the zygote makes the folder before it forks, the child makes it the
temp folder of its process and of what it starts (`tempfile`, `TMPDIR`), and the zygote
removes it when the child and its process group are gone. A zygote killed with its cell
(a cancelled or interrupted run, a Ray worker that died) removes nothing: each folder
holds a lock its zygote and child hold while they live, and the next zygote to start on
the machine removes every folder whose lock nobody holds. The node's locks are not a
cell's: the child keeps them where every other process finds them."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.cell import node

PREFIX = "harness-cell-"
HELD = ".held"  # flock'ed by the folder's zygote (and so its child) while they live


@contextlib.contextmanager
def folder() -> Iterator[Path | None]:
    """In the zygote: a new folder for one child, removed after the block; None where the
    temp folder takes none (full, say): the cell then meets that itself, in its record."""
    try:
        made = Path(tempfile.mkdtemp(prefix=PREFIX))
    except OSError:
        yield None
        return
    held = _hold(made)
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)
        if held is not None:
            os.close(held)


def enter(made: Path | None) -> None:
    """In the child: `made` is where this process and what it starts put temporary files."""
    if made is None:
        return
    os.environ.setdefault(node.FOLDER_ENV, str(node.default_folder()))
    tempfile.tempdir = str(made)
    os.environ["TMPDIR"] = str(made)


def sweep() -> None:
    """Remove the folders of cells whose zygote died with them (nobody holds their lock)."""
    for found in Path(tempfile.gettempdir()).glob(f"{PREFIX}*/{HELD}"):
        with contextlib.suppress(OSError):
            fd = os.open(found, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError: alive
                shutil.rmtree(found.parent, ignore_errors=True)
            finally:
                os.close(fd)


def _hold(made: Path) -> int | None:
    """The folder's lock, taken (None where it cannot be written: nothing to sweep then)."""
    try:
        fd = os.open(made / HELD, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return None
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd
