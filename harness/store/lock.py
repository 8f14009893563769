"""One `harness run` at a time in a run directory. A run (new, or `--resume`) holds an
exclusive lock on `DIR/.lock` while it writes there, so that two `--resume` of one run
never both run its pending cells. The lock is the kernel's (flock): it goes with its
holder, so a run killed without grace leaves no lock behind, only the file naming it.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from harness.store.files import RunDirError

LOCK = ".lock"


@contextmanager
def holding(run_dir: Path, *, create: bool = False) -> Iterator[None]:
    """Hold the run directory's lock (RunDirError naming the holder where another run has
    it). With `create`, make the directory (and its parents) first; those that are still
    empty when the lock is let go are removed again, so a run refused before it wrote
    anything leaves nothing behind."""
    made = _make_dirs(run_dir) if create else []
    try:
        fd = _acquire(run_dir)
    except BaseException:
        _remove_empty(made)
        raise
    try:
        yield
    finally:
        (run_dir / LOCK).unlink(missing_ok=True)
        os.close(fd)
        _remove_empty(made)


def _acquire(run_dir: Path) -> int:
    path = run_dir / LOCK
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            raise RunDirError(f"cannot write in {run_dir}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise RunDirError(
                f"{run_dir} is in use by another harness run ({holder}); wait for it to end"
            ) from None
        if _still_there(fd, path):  # not a file its last holder unlinked as we opened it
            os.ftruncate(fd, 0)
            os.write(fd, _about_me().encode())
            return fd
        os.close(fd)


def _still_there(fd: int, path: Path) -> bool:
    try:
        return os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _about_me() -> str:
    return json.dumps(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": ["harness", *sys.argv[1:]],
        }
    )


def _holder(fd: int) -> str:
    """'pid 4242 on host-a since 2026-01-01T02:00:00+00:00: harness run --resume DIR'."""
    try:
        about = json.loads(os.pread(fd, 4096, 0) or b"{}")
        command = " ".join(str(a) for a in about.get("command") or ())
        return f"pid {about['pid']} on {about['host']} since {about['since']}: {command}"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "a process that has not said who it is yet"


def _make_dirs(path: Path) -> list[Path]:
    """mkdir -p, returning the folders it made, innermost first."""
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            pass
        except OSError as exc:
            _remove_empty(missing[missing.index(folder) + 1 :])
            raise RunDirError(f"cannot create {path}: {exc.strerror}") from None
    return missing


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (the run wrote there), or gone
            return
