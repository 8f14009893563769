"""A cell's temporary files go with the cell, however it ended (harness.runtime.scratch):
real cells forked from a zygote of their own whose temp folder is the test's, one killed
at its timeout after writing its graph, one killed without last words after writing a
file as a model's code may. The node's locks stay where every process finds them."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cell.node import FOLDER_ENV
from harness.runtime import scratch
from harness.runtime.zygote import Zygotes, run_cell_isolated
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask
from harness.store.status import Status
from tests.conftest import FIXTURES

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
