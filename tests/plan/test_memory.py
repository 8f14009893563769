"""A cell's memory need (harness/plan/memory.py), from its model's weights and its
exporter's measured factor, and the most one node offers."""

from __future__ import annotations

import pytest

from harness import exporters
from harness.plan.memory import BASE_GB, GIB, ORT_MEMORY, largest_node_gb, memory_need_gb


def test_a_cell_needs_its_process_its_weights_and_the_larger_peak_over_them() -> None:
    weights = 4 * GIB  # Llama-3.2-1B in float32 is 4.6 GiB; any size will do
    factor = max(exporters.get("dynamo").export_memory, ORT_MEMORY)
    need = memory_need_gb({"parameter_bytes": weights}, "dynamo")
    assert need == pytest.approx(BASE_GB + 4 * (1 + factor), abs=0.01)
    assert memory_need_gb({"parameter_bytes": weights}, "torchscript") is not None


@pytest.mark.parametrize("metadata", [{}, {"parameter_bytes": "many"}, {"parameter_bytes": True}])
def test_an_entry_that_does_not_say_its_weights_needs_nothing_known(metadata: dict) -> None:
    assert memory_need_gb(metadata, "dynamo") is None


def test_the_largest_node_is_the_alive_one_with_the_most_memory() -> None:
    nodes = [
        {"alive": True, "resources": {"memory": 4 * GIB}},
        {"alive": False, "resources": {"memory": 64 * GIB}},  # dead: offers nothing
        {"alive": True, "resources": {"memory": 12 * GIB}},
        {"alive": True, "resources": {"CPU": 2}},
    ]
    assert largest_node_gb(nodes) == 12.0
    assert largest_node_gb([{"alive": True, "resources": {}}]) is None
