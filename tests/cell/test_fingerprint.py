"""The graph fingerprint: names, doc strings and metadata do not count; ops, attributes,
topology and weights do, wherever the weights are stored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.cell.fingerprint import graph_fingerprint


def _model(
    *,
    prefix: str = "",
    alpha: float = 0.5,
    weight: float = 1.0,
    extra_transpose: bool = False,
    producer: str = "a",
) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.full((4, 4), weight, np.float32), f"{prefix}w")
    nodes = [
        helper.make_node(
            "MatMul", [f"{prefix}x", f"{prefix}w"], [f"{prefix}y"], name=f"{prefix}mm"
        ),
        helper.make_node(
            "LeakyRelu", [f"{prefix}y"], [f"{prefix}z"], alpha=alpha, doc_string=prefix
        ),
    ]
    if extra_transpose:
        nodes.append(helper.make_node("Transpose", [f"{prefix}z"], [f"{prefix}t"], perm=[1, 0]))
    out = f"{prefix}t" if extra_transpose else f"{prefix}z"
    graph = helper.make_graph(
        nodes,
        f"{prefix}graph",
        [helper.make_tensor_value_info(f"{prefix}x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [4, 4])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.producer_name = producer
    helper.set_model_props(model, {"exported_by": producer})
    return model


def _saved(model: onnx.ModelProto, path: Path, *, external: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(
        model,
        str(path),
        save_as_external_data=external,
        location=path.name + ".data",
        size_threshold=0,
    )
    return path


def test_names_doc_strings_and_metadata_do_not_count(tmp_path: Path) -> None:
    a = graph_fingerprint(_saved(_model(), tmp_path / "a" / "m.onnx"))
    b = graph_fingerprint(_saved(_model(prefix="p_", producer="b"), tmp_path / "b" / "m.onnx"))
    assert a == b and len(a) == 64


def test_weights_count_embedded_or_external_alike(tmp_path: Path) -> None:
    embedded = graph_fingerprint(_saved(_model(), tmp_path / "a" / "m.onnx"))
    external = graph_fingerprint(_saved(_model(), tmp_path / "b" / "m.onnx", external=True))
    other = graph_fingerprint(_saved(_model(weight=2.0), tmp_path / "c" / "m.onnx", external=True))
    assert embedded == external != other


def test_attributes_and_extra_ops_count(tmp_path: Path) -> None:
    base = graph_fingerprint(_saved(_model(), tmp_path / "a" / "m.onnx"))
    alpha = graph_fingerprint(_saved(_model(alpha=0.25), tmp_path / "b" / "m.onnx"))
    transpose = graph_fingerprint(_saved(_model(extra_transpose=True), tmp_path / "c" / "m.onnx"))
    assert len({base, alpha, transpose}) == 3


def test_topology_counts(tmp_path: Path) -> None:
    """Same ops, other wiring: Add(x, w) then Mul(x, .) vs Mul(w, .)."""

    def wired(second_input: str) -> onnx.ModelProto:
        w = numpy_helper.from_array(np.ones((2,), np.float32), "w")
        nodes = [
            helper.make_node("Add", ["x", "w"], ["y"]),
            helper.make_node("Mul", [second_input, "y"], ["z"]),
        ]
        graph = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
            [w],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])

    a = graph_fingerprint(_saved(wired("x"), tmp_path / "a" / "m.onnx"))
    b = graph_fingerprint(_saved(wired("w"), tmp_path / "b" / "m.onnx"))
    assert a != b
