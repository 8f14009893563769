"""Dynamic cells after the export (harness/cell/dynamic.py): a declared-dynamic dimension the
graph holds fixed is found on the graph itself, named by input, axis and dimension; the
shapes a cell is verified and timed at come from the entry's sizes, through its own
`inputs_at` where it has one."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
import torch
from onnx import TensorProto, helper

from harness.cell.dynamic import (
    fixed_dims,
    latency_shapes,
    shape_label,
    specialised_error,
    verification_shapes,
)
from harness.cell.failures import signature
from harness.cell.shapes import Inputs
from harness.zoo import ModelSpec


def _graph(path: Path, shapes: dict[str, list[int | str]]) -> Path:
    """A one-node ONNX graph (Identity per input) whose inputs have these shapes."""
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()]
    outputs = [helper.make_tensor_value_info(f"{n}_out", TensorProto.FLOAT, None) for n in shapes]
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n in shapes]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs))
    onnx.save(model, path)
    return path


INPUTS = Inputs(
    (torch.zeros(2, 3), torch.zeros(2, 4, 5, 16)), {}, ("ids", "past"), ("input_ids", "past.0.key")
)
SPEC = ({0: "batch", 1: "sequence"}, {0: "batch", 2: "past"})


def test_a_dynamic_graph_fixes_nothing(tmp_path: Path) -> None:
    path = _graph(tmp_path / "m.onnx", {"input_ids": ["b", "s"], "past.0.key": ["b", 4, "p", 16]})
    assert fixed_dims(path, INPUTS, SPEC) == []


def test_each_fixed_declared_dimension_is_named(tmp_path: Path) -> None:
    path = _graph(tmp_path / "m.onnx", {"input_ids": ["b", 3], "past.0.key": [2, 4, 5, 16]})
    fixed = fixed_dims(path, INPUTS, SPEC)
    assert [(f.input, f.axis, f.dim, f.size) for f in fixed] == [
        ("input_ids", 1, "sequence", 3),
        ("past.0.key", 0, "batch", 2),
        ("past.0.key", 2, "past", 5),
    ]
    error = specialised_error(fixed)
    assert str(error).startswith("declared-dynamic dimension batch, past, sequence fixed")
    assert "past.0.key axis 2 (past) fixed at 5" in str(error)
    # One signature per set of dimension names, whatever the inputs: a failure cluster.
    assert signature(error) == (
        "DimensionSpecialized: batch, past, sequence fixed in the exported graph"
    )


def test_an_input_the_graph_dropped_fixes_nothing(tmp_path: Path) -> None:
    path = _graph(tmp_path / "m.onnx", {"input_ids": ["b", "s"]})
    assert fixed_dims(path, INPUTS, SPEC) == []


def _spec(**fields: object) -> ModelSpec:
    return ModelSpec(
        name="m",
        family="test",
        build=torch.nn.Identity,
        example_inputs=lambda: (torch.zeros(2, 6),),
        dynamic_shapes=({0: "batch", 1: "past"},),
        **fields,  # type: ignore[arg-type]
    )


def _made_by_the_entry(model: object, sizes: dict[str, int]) -> tuple[torch.Tensor, ...]:
    # Values the slicing fallback could never give: the entry's own inputs are used.
    return (torch.full((sizes["batch"], sizes["past"]), 7.0),)


def test_shapes_come_from_the_entrys_inputs_at_where_it_has_one() -> None:
    spec = _spec(
        dynamic_sizes=({"batch": 1, "past": 0}, {"batch": 3, "past": 9}),
        inputs_at=_made_by_the_entry,
        latency_shapes={"decode_step": {"batch": 1, "past": 32}},
    )
    inputs = Inputs((torch.zeros(2, 6),), {}, ("x",), ("x",))
    shapes = verification_shapes(spec, torch.nn.Identity(), inputs)
    assert [(label, tuple(i.args[0].shape)) for label, i in shapes] == [
        ("batch=1,past=0", (1, 0)),
        ("batch=3,past=9", (3, 9)),
    ]
    assert shapes[1][1].args[0].unique().tolist() == [7.0]
    assert shapes[1][1].names() == ["x"]
    timed = latency_shapes(spec, torch.nn.Identity(), inputs)
    assert {k: (sizes, tuple(i.args[0].shape)) for k, (sizes, i) in timed.items()} == {
        "decode_step": ({"batch": 1, "past": 32}, (1, 32))
    }


def test_without_inputs_at_the_example_is_sliced_as_before() -> None:
    inputs = Inputs((torch.arange(12.0).reshape(2, 6),), {}, ("x",))
    ((label, other),) = verification_shapes(_spec(), torch.nn.Identity(), inputs)
    assert label == "second_shape" and other.args[0].tolist() == [[0.0, 1.0, 2.0]]


@pytest.mark.parametrize(
    ("sizes", "label"), [({"past": 0, "batch": 1}, "batch=1,past=0"), ({}, "")]
)
def test_a_shape_label_lists_its_sizes_in_order(sizes: dict[str, int], label: str) -> None:
    assert shape_label(sizes) == label


def test_a_batch_cell_tiles_the_example_along_its_batch_dimensions_only() -> None:
    """The batch axis (harness.store.axes.BATCH): every input's `batch` dimension takes the
    cell's size, the other dimensions keep the example's; 0 keeps the example itself."""
    from harness.cell.dynamic import at_batch

    spec = _entry(SPEC)
    ids = torch.arange(6.0).reshape(2, 3)
    inputs = Inputs((ids, torch.zeros(2, 4, 5, 16)), {}, ("ids", "past"), ("input_ids", "p"))
    five = at_batch(spec, torch.nn.Identity(), inputs, 5)
    assert [tuple(t.shape) for t in five.leaves()] == [(5, 3), (5, 4, 5, 16)]
    assert five.args[0][4].tolist() == ids[0].tolist()  # tiled: rows of the example, again
    assert at_batch(spec, torch.nn.Identity(), inputs, 0) is inputs


def test_an_entry_without_a_batch_dimension_cannot_take_another_batch() -> None:
    from harness.cell.dynamic import NoBatchDimension, at_batch

    inputs = Inputs((torch.zeros(2, 3),), {}, ("x",))
    with pytest.raises(NoBatchDimension, match="no batch dimension to make batch 4"):
        at_batch(_entry(({1: "sequence"},)), torch.nn.Identity(), inputs, 4)
    with pytest.raises(NoBatchDimension):
        at_batch(_entry(None), torch.nn.Identity(), inputs, 4)


def _entry(dynamic_shapes: object) -> ModelSpec:
    return ModelSpec(
        name="m",
        family="test",
        build=torch.nn.Identity,
        example_inputs=lambda: (torch.zeros(2, 6),),
        dynamic_shapes=dynamic_shapes,  # type: ignore[arg-type]
    )
