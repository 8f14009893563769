"""Writing into a directory that is untrusted input (a run directory CI downloaded): never
through a symlink, never outside it (docs/design.md, run directory).

Every file is written to a temporary file beside its target and put in place with
`os.replace`, which replaces a link itself instead of writing through it; a target that
is a symlink, or whose folders lead out of the directory through one, is refused
(`UnsafePath`, a RunDirError: exit 2 where a command meets it). Appends open the file
without following a link.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


class RunDirError(Exception):
    """A run directory that is missing, unreadable, of an incompatible schema, or unsafe
    to write."""


class UnsafePath(RunDirError):
    """A path the harness will not write: a symlink, or one leading outside its directory."""


class WriteFailed(RunDirError):
    """A write the file system refused: a full disk, a quota, a read-only mount."""

    def __init__(self, path: Path, error: OSError) -> None:
        super().__init__(f"cannot write {path}: {error.strerror or error}")
        self.path = path


def _relative(root: Path, target: Path | str) -> Path:
    relative = Path(os.path.relpath(os.path.abspath(root / target), os.path.abspath(root)))
    if relative.parts[:1] == ("..",):
        raise UnsafePath(f"{target} is outside {root}; refusing to write it")
    return relative


def inside(root: Path, target: Path | str) -> Path:
    """`target` (absolute, or relative to `root`) as a path whose every part below `root`
    is no symlink, and which stays inside `root`; UnsafePath otherwise."""
    base = root.resolve()
    relative = _relative(root, target)
    here = base
    for part in relative.parts:
        here = here / part
        if here.is_symlink():
            raise UnsafePath(
                f"{root / relative} leads through the symlink {root / here.relative_to(base)}"
                f" (to {os.readlink(here)}); refusing to write through it"
            )
    if not here.resolve().is_relative_to(base):
        raise UnsafePath(f"{root / relative} is outside {root}; refusing to write it")
    return root / relative


def folder_inside(root: Path, target: Path | str) -> Path:
    """`inside`, made a folder (with its parents)."""
    folder = inside(root, target)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_inside(
    root: Path, target: Path | str, data: str | bytes | Callable[[BinaryIO], object]
) -> Path:
    """Write `data` to `target` under `root`: a temporary file beside it, then replaced
    into place (text as UTF-8; a callable writes into the open file). Returns the path."""
    path = inside(root, target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise WriteFailed(path, exc) from None
    try:
        os.fchmod(fd, _mode_of(path))
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise WriteFailed(path, exc) from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _mode_of(path: Path) -> int:
    """The file's mode where it exists, else what `open` gives a new file (mkstemp: 0600)."""
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def append_inside(root: Path, target: Path | str) -> int:
    """`target` under `root` opened to append (a file descriptor), never through a symlink."""
    path = inside(root, target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise WriteFailed(path, exc) from None


def first_symlink(root: Path) -> Path | None:
    """The first symlink found under `root` (not following any), or None."""
    for folder, dirs, files in os.walk(root):
        for name in sorted(dirs + files):
            if (Path(folder) / name).is_symlink():
                return Path(folder) / name
    return None
