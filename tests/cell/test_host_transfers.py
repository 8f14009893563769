"""A CUDA cell's host<->device copies: counted in the graph ORT writes once it has placed
the nodes on providers, subgraphs included, and the written graph dropped after. No CUDA
provider exists here, so the graph ORT would write is written by hand (real ONNX files);
what ORT writes on a GPU is the device check's (docs/guide/gpu.md)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

from harness.cell.ort import Optimisation, OrtRunner, host_transfers
from harness.runtime.pipeline import PARTITIONED, _host_transfers


def _partitioned_graph(path: Path) -> Path:
    """y = If(c) then MemcpyToHost(MemcpyFromHost(x)) else x, with one more MemcpyFromHost
    in the main graph: 2 from the host, 1 to it."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    then = helper.make_graph(
        [
            helper.make_node("MemcpyFromHost", ["x_gpu"], ["t1"]),
            helper.make_node("MemcpyToHost", ["t1"], ["t2"]),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("t2", TensorProto.FLOAT, [2])],
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x_gpu"], ["e"])],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node("MemcpyFromHost", ["x"], ["x_gpu"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    onnx.save(helper.make_model(helper.make_graph(nodes, "main", [x, c], [y])), path)
    return path


def test_copies_are_counted_by_type_in_subgraphs_too(tmp_path: Path) -> None:
    graph = _partitioned_graph(tmp_path / "g.onnx")
    assert host_transfers(graph) == {"MemcpyFromHost": 2, "MemcpyToHost": 1}


def test_the_written_graph_and_its_weights_are_dropped_once_counted(tmp_path: Path) -> None:
    written = _partitioned_graph(tmp_path / PARTITIONED)
    (tmp_path / f"{PARTITIONED}.data").write_bytes(b"\0" * 64)
    assert _host_transfers(written) == {"MemcpyFromHost": 2, "MemcpyToHost": 1}
    assert list(tmp_path.iterdir()) == []
    assert _host_transfers(None) is None  # a CPU cell writes none and counts none


def test_a_session_writes_its_placed_graph_with_the_weights_beside_it(tmp_path: Path) -> None:
    """What a CUDA cell asks of ORT, on the CPU provider: the graph it placed, written, its
    initializers in a file of their own (a graph past 2 GB cannot be written whole)."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [256], [1.0] * 256)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [256])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [256])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.save(model, tmp_path / "m.onnx")
    written = tmp_path / PARTITIONED
    OrtRunner(tmp_path / "m.onnx", 1, "cpu", optimisation=Optimisation(written_to=written))
    assert (tmp_path / f"{PARTITIONED}.data").stat().st_size >= 256 * 4
    assert host_transfers(written) == {"MemcpyFromHost": 0, "MemcpyToHost": 0}
