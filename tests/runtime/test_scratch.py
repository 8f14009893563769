"""A cell's temporary files go with the cell, however it ended (harness.runtime.scratch):
real cells forked from zygotes of their own whose temp folder is the test's, one killed
at its timeout after writing its graph, one killed without last words after writing a
file as a model's code may, one whose zygote was killed with it (a cancelled run). The
node's locks stay where every process finds them."""

from __future__ import annotations

import concurrent.futures
import fcntl
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cell.node import FOLDER_ENV
from harness.runtime import exits, scratch
from harness.runtime.zygote import Zygotes, run_cell_isolated
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask
from harness.store.status import Status
from tests.conftest import FIXTURES, process_table, wait_for

SCRATCH, TINY = FIXTURES / "scratch" / "scratch.py", FIXTURES / "tiny" / "models.py"
QUICK = Protocol(warmup_min_iters=2, warmup_max_s=0.1, min_iters=5, min_time_s=0.02, max_time_s=0.2)


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Zygotes]]:
    """The machine's temp folder, as the zygote and its cells see it, and that zygote;
    the node's locks where a run on this machine keeps them (no folder set for them)."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.delenv(FOLDER_ENV, raising=False)
    zygotes = Zygotes()
    try:
        yield root, zygotes
    finally:
        zygotes.close()


@pytest.mark.slow  # a zygote of its own and a cell killed at its timeout
def test_what_a_cell_wrote_in_temp_goes_with_it_however_it_ended(
    temp_root: tuple[Path, Zygotes], tmp_path: Path
) -> None:
    root, zygotes = temp_root

    def run(source: Path, model: str, timeout_s: float = 120) -> Status:
        task = CellTask(Cell(model, "torchscript", 18), str(source), "r", str(tmp_path / "run"),
                        protocol=QUICK, timeout_s=timeout_s)  # fmt: skip
        return run_cell_isolated(task, zygotes=zygotes).status

    assert run(TINY, "tiny_mlp") == Status.OK
    # what the zygote keeps there (onnxruntime's import writes a file), and the node's lock
    # files, where the next process looks for them: nothing of the cell's
    kept = sorted(p.name for p in root.iterdir())
    assert "harness-node" in kept and (root / "harness-node" / "work").is_file()
    assert not [name for name in kept if name.startswith("harness-cell-")], kept
    # hangs only once a graph is under the temp folder: the timeout found one there
    assert run(SCRATCH, "scratch_hang_after_export", timeout_s=10) == Status.TIMEOUT
    assert sorted(p.name for p in root.iterdir()) == kept
    assert run(SCRATCH, "scratch_killed_after_writing") == Status.CRASHED
    assert sorted(p.name for p in root.iterdir()) == kept


@pytest.mark.slow  # two zygotes, a cell that waits to be cancelled
def test_the_folder_of_a_cell_killed_with_its_zygote_goes_when_the_next_zygote_starts(
    temp_root: tuple[Path, Zygotes], tmp_path: Path
) -> None:
    root, zygotes = temp_root
    task = CellTask(Cell("scratch_hang_after_export", "torchscript", 18), str(SCRATCH), "r",
                    str(tmp_path / "run"), protocol=QUICK, timeout_s=600)  # fmt: skip
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        hanging = pool.submit(run_cell_isolated, task, None, zygotes)
        wait_for(lambda: any(root.glob("harness-cell-*/**/*.onnx")), timeout=120)
        zygotes.stop()  # as a cancelled run does: the zygote killed, its cell with it
        reason = hanging.result(timeout=60).reason or ""
        assert reason.startswith("the cell was cancelled; in its "), reason  # and its stage
    (left,) = root.glob("harness-cell-*")
    wait_for(lambda: _free(left / scratch.HELD), timeout=120)  # the cell's process is gone too
    assert left.is_dir()  # nobody was left to remove it
    fresh = Zygotes()
    try:
        ok = CellTask(Cell("tiny_mlp", "torchscript", 18), str(TINY), "r", str(tmp_path / "run"),
                      protocol=QUICK, timeout_s=120)  # fmt: skip
        assert run_cell_isolated(ok, zygotes=fresh).status == Status.OK
    finally:
        fresh.close()
    assert not list(root.glob("harness-cell-*"))


def _free(lock: Path) -> bool:
    """Whether nobody holds `lock` (taken and let go at once)."""
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def test_a_temp_folder_that_takes_no_folder_leaves_the_cell_to_meet_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """(A full disk, here a file where the folder should be: mkdir fails as it would.)"""
    (tmp_path / "file").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "file"))
    with scratch.folder() as made:
        assert made is None
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with scratch.folder() as made:
        assert made is not None and made.parent == tmp_path and made.is_dir()
    assert not made.exists()


def test_a_sweep_leaves_the_folder_of_a_living_cell(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / f"{scratch.PREFIX}dead"
    dead.mkdir()
    (dead / scratch.HELD).touch()  # its zygote and child gone: nobody holds it
    with scratch.folder() as living:
        assert living is not None
        scratch.sweep()
        assert living.is_dir() and not dead.exists()


def test_the_zygote_waits_until_the_cells_process_group_is_gone() -> None:
    """What a cell started is ended before its folder is removed: a group's leader and a
    process it left in the background both killed, none of them left. (The bounded wait
    for a process the kernel is slow to take down is not forced here.)"""
    group = subprocess.Popen(["sh", "-c", "sleep 60 & exec sleep 60"], start_new_session=True)
    wait_for(lambda: len(_members(group.pid)) == 2, timeout=10)
    reaper = threading.Thread(target=group.wait)  # as the zygote reaps its child
    reaper.start()
    exits.end_group(group.pid)
    assert _members(group.pid) == []
    reaper.join(timeout=10)


def _members(pgid: int) -> list[int]:
    """The live processes of a process group (zombies are gone already)."""
    table = process_table()
    return [pid for pid, fields in table.items() if int(fields[2]) == pgid and fields[0] != "Z"]
