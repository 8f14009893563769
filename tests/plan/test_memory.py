"""A cell's memory need (harness/plan/memory.py), from its model's weights and its
exporter's measured factor, an exporter pair's from its graphs' files, and the most one
node offers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import exporters
from harness.plan.memory import (
    BASE_GB,
    GIB,
    ORT_MEMORY,
    largest_first,
    largest_node_gb,
    memory_need_gb,
    pair_need_gb,
)
from harness.store.paired import PairTask


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


def _graph(folder: Path, data_bytes: int) -> str:
    """A graph's folder in a store: its model file and external data of `data_bytes`
    (sparse: its size is what counts, nothing is written)."""
    folder.mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"\0" * 1024)
    with (folder / "model.onnx.data").open("wb") as data:
        data.truncate(data_bytes)
    return str(folder / "model.onnx")


def test_a_pair_needs_its_process_both_sessions_and_the_larger_ones_build(tmp_path: Path) -> None:
    dynamo, torchscript = _graph(tmp_path / "a", 3 * GIB), _graph(tmp_path / "b", 2 * GIB)
    need = pair_need_gb(PairTask(("m",), "m", dynamo, torchscript))
    assert need == pytest.approx(BASE_GB + 3 + 2 + 3 * (ORT_MEMORY - 1), abs=0.01)
    gone = pair_need_gb(PairTask(("m",), "m", dynamo, str(tmp_path / "gone" / "model.onnx")))
    assert gone == pytest.approx(BASE_GB + 3 * ORT_MEMORY, abs=0.01)  # its error says why


def test_a_pair_asks_ray_for_its_need_and_never_more_than_the_largest_node_offers(
    tmp_path: Path,
) -> None:
    from harness.dispatch.remote import pair_options

    def node(alive: bool, gib: float) -> dict[str, object]:
        return {"Alive": alive, "Resources": {"CPU": 1.0, "memory": gib * GIB}}

    big = PairTask(("m",), "m", _graph(tmp_path / "a", 3 * GIB), _graph(tmp_path / "b", 2 * GIB))
    small = PairTask(("m",), "m", _graph(tmp_path / "c", 0), _graph(tmp_path / "d", 0), threads=2)
    cluster = [node(True, 4), node(False, 64), node(True, 16)]
    assert pair_options(big, cluster) == {"num_cpus": 1, "memory": int(pair_need_gb(big) * GIB)}
    assert pair_options(big, cluster[:2]) == {"num_cpus": 1, "memory": 4 * GIB}
    assert pair_options(small, cluster)["memory"] == int(pair_need_gb(small) * GIB)
    assert pair_options(small, cluster)["num_cpus"] == 2
    assert pair_options(small, [node(True, 0)]) == {"num_cpus": 2}  # no node says its memory


def test_models_go_largest_first_and_those_without_a_size_keep_their_order_last() -> None:
    metadata = {
        "small": {"parameter_bytes": 10},
        "big": {"parameter_bytes": 10**9},
        "tied_a": {"parameter_bytes": 10**6},
        "tied_b": {"parameter_bytes": 10**6},
        "unsized": {},
        "not_a_number": {"parameter_bytes": "large"},
    }
    models = ["unsized", "small", "tied_a", "not_a_number", "big", "tied_b"]
    expected = ["big", "tied_a", "tied_b", "small", "unsized", "not_a_number"]
    assert largest_first(models, metadata) == expected
