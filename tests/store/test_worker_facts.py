"""Where and at what cost a cell ran travels as WorkerInfo from each layer that learns it
(the cell's process, its zygote, the Ray worker, the driver), not as dicts merged on the
way: a misspelt fact fails where it is written, and a later layer's facts win."""

from __future__ import annotations

import pytest

from harness.store.details import ColdStart, WorkerInfo


def test_facts_of_each_layer_are_added_and_later_ones_win() -> None:
    cold = ColdStart(exporter="dynamo", opset=18, seconds=2.5, cpu_seconds=2.4)
    child = WorkerInfo(cell_pid=11, fork_s=0.007, cell_uss_mb=52.0)
    zygote = WorkerInfo(zygote_pid=10, prepare_s=0.1, cold_start=cold)
    worker = WorkerInfo(node="n1", host="h", pid=9, started_at=100.0, finished_at=101.5)
    driver = WorkerInfo(submitted_at=99.0, collected_at=101.6, started_at=100.2)
    merged = child.with_facts(zygote).with_facts(worker).with_facts(driver)
    assert (merged.cell_pid, merged.zygote_pid, merged.pid, merged.node) == (11, 10, 9, "n1")
    assert merged.cold_start == cold
    assert merged.started_at == 100.2  # the driver's word, given last
    assert merged.finished_at == 101.5  # a fact the later layer does not know stays
    assert WorkerInfo.from_dict(merged.to_dict()) == merged


def test_a_misspelt_fact_fails_where_it_is_written() -> None:
    with pytest.raises(TypeError, match="zygote_pdi"):
        WorkerInfo(zygote_pdi=10)  # type: ignore[call-arg]


def test_a_newer_writers_keys_are_kept_beside_the_facts() -> None:
    read = WorkerInfo.from_dict({"pid": 3, "gpu_uuid": "GPU-1"})
    merged = read.with_facts(WorkerInfo(started_at=5.0))
    assert merged.extra == {"gpu_uuid": "GPU-1"} and merged.pid == 3
