"""A cell's process sees the GPUs its task was given, whatever its zygote inherited, and
the zygote sees none (no Ray and no GPU here: this test process plays the worker, and the
model reports what its process was given as its build error).

On a GPU machine a zygote that opened CUDA breaks every child ("Cannot re-initialize CUDA
in forked subprocess", the first GPU run): the zygote hides the GPUs from itself and asks
through NVML, and each child gets its view back."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.runtime.zygote import _WORKER, run_cell_isolated
from harness.store.records import Cell, CellTask
from tests.conftest import FIXTURES

SOURCE = FIXTURES / "gpu_env" / "models.py"


def _seen(run_dir: Path, gpus: str | None) -> str | None:
    task = CellTask(Cell("report_visible_gpus", "torchscript", 18), str(SOURCE), "r", str(run_dir))
    return run_cell_isolated(task, gpus).error_message


@pytest.fixture
def zygote_of_a_gpu_worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A zygote spawned while its worker names GPU 0 (as Ray sets it for a first CUDA
    task); later tasks of the same worker get other GPUs, or none."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    _WORKER.close()
    yield
    _WORKER.close()


@pytest.mark.slow  # a zygote of its own: 4-5 s
@pytest.mark.usefixtures("zygote_of_a_gpu_worker")
def test_each_cell_sees_the_gpus_of_its_task_in_one_zygote(tmp_path: Path) -> None:
    plain = "PYTORCH_NVML_BASED_CUDA_CHECK=<unset>"
    assert _seen(tmp_path, "3") == f"CUDA_VISIBLE_DEVICES=3 {plain}"
    assert _seen(tmp_path, "1,2") == f"CUDA_VISIBLE_DEVICES=1,2 {plain}"
    assert _seen(tmp_path, "") == f"CUDA_VISIBLE_DEVICES= {plain}"  # a CPU cell: none
    assert _seen(tmp_path, None) == f"CUDA_VISIBLE_DEVICES=0 {plain}"  # the worker's view
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"


@pytest.mark.slow  # a zygote of its own: 4-5 s
@pytest.mark.usefixtures("zygote_of_a_gpu_worker")
def test_the_zygote_sees_no_gpu_and_asks_nvml(tmp_path: Path) -> None:
    _seen(tmp_path, None)  # starts the zygote
    assert "cpu" in _WORKER.pools
    assert _WORKER.pools["cpu"].submit(os.getenv, "CUDA_VISIBLE_DEVICES").result() == ""
    assert _WORKER.pools["cpu"].submit(os.getenv, "PYTORCH_NVML_BASED_CUDA_CHECK").result() == "1"
