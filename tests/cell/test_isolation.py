"""Isolated cells (no Ray): each runs in a child forked from the worker's zygote, which
never runs a cell itself, so no cell sees state another cell left. Real processes, real
exports, a real onnxruntime."""

from __future__ import annotations

import builtins
import os
import signal
from pathlib import Path

import pytest

from harness.cell.isolation import _Zygote, run_cell_isolated
from harness.cell.worker import run_cell
from harness.plan.suites import Protocol
from harness.store.records import Cell, CellTask
from tests.conftest import FIXTURES

QUICK = Protocol(warmup_min_iters=2, warmup_max_s=0.1, min_iters=5, min_time_s=0.02, max_time_s=0.2)
STICKY = FIXTURES / "sticky" / "sticky.py"
EXPORT_ONLY = FIXTURES / "fidelity" / "export_only.py"


def _task(tmp_path: Path, source: Path, model: str) -> CellTask:
    return CellTask(Cell(model, "torchscript", 17), str(source), "r", str(tmp_path), protocol=QUICK)


@pytest.fixture
def no_poison() -> None:
    yield
    if hasattr(builtins, "_harness_test_poison"):
        del builtins._harness_test_poison


@pytest.mark.usefixtures("no_poison")
def test_isolated_cells_see_no_state_left_by_other_cells(tmp_path: Path) -> None:
    assert run_cell(_task(tmp_path, STICKY, "sticky_a")).status == "ok"  # poisons this process
    poisoned = run_cell(_task(tmp_path, STICKY, "sticky_b"))
    assert "state left by an earlier cell" in (poisoned.error_message or "")
    # Isolated, in the same order: the first leaves its state in its own forked child only.
    assert run_cell_isolated(_task(tmp_path, STICKY, "sticky_a")).status == "ok"
    again = run_cell_isolated(_task(tmp_path, STICKY, "sticky_b"))
    assert again.status == "ok", again.error_message


def test_a_cell_that_kills_its_process_is_crashed_and_the_zygote_lives_on(
    tmp_path: Path,
) -> None:
    crash = run_cell_isolated(_task(tmp_path, EXPORT_ONLY, "export_only_crash"))
    assert crash.status == "crashed"
    assert "SIGSEGV" in (crash.reason or ""), crash.reason
    zygote = _zygote_pid()
    after = run_cell_isolated(_task(tmp_path, EXPORT_ONLY, "export_only_value"))
    assert after.status == "numerics_mismatch"  # the export-only branch doubles the output
    assert _zygote_pid() == zygote


def test_a_zygote_killed_from_outside_is_started_again(tmp_path: Path) -> None:
    assert run_cell_isolated(_task(tmp_path, STICKY, "sticky_a")).status == "ok"
    killed = _zygote_pid()
    os.kill(killed, signal.SIGKILL)
    record = run_cell_isolated(_task(tmp_path, STICKY, "sticky_a"))
    assert record.status == "ok", record.reason
    assert _zygote_pid() != killed


def _zygote_pid() -> int:
    assert _Zygote.pool is not None
    (pid,) = _Zygote.pool._processes  # the one process of its pool
    return pid
