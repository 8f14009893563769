from __future__ import annotations

import torch

from harness.cell.shapes import Inputs, dynamic_axes, dynamo_shapes, flatten_outputs, second_shape


def _doc_mlp_inputs() -> Inputs:
    # The torch.onnx doc's MLP: a tensor, a dict and a list, batch dynamic in all three.
    return Inputs(
        (torch.rand(97, 8), {"tensor_x": torch.rand(97, 8)}, [torch.rand(97, 8)]),
        {},
        ("tensor_x", "input_dict", "input_list"),
    )


DOC_SPEC = ({0: "batch_size"}, {"tensor_x": {0: "batch_size"}}, [{0: "batch_size"}])


def test_dynamic_axes_follow_flattening_order() -> None:
    axes = dynamic_axes(_doc_mlp_inputs(), DOC_SPEC)
    assert axes == {f"input_{i}": {0: "batch_size"} for i in range(3)}


def test_spec_keyed_by_parameter_name() -> None:
    inputs = Inputs((torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 5)), {}, ("ids", "mask"))
    axes = dynamic_axes(inputs, {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}})
    assert axes == {"input_0": {0: "batch", 1: "seq"}, "input_1": {0: "batch", 1: "seq"}}


def test_second_shape_shrinks_batch_to_one_and_halves_others() -> None:
    inputs = Inputs((torch.arange(24).reshape(2, 12), torch.ones(2, 12)), {}, ("ids", "mask"))
    spec = ({0: "batch", 1: "seq"}, {0: "batch", 1: "seq"})
    other = second_shape(inputs, spec, None)
    assert [tuple(t.shape) for t in other.leaves()] == [(1, 6), (1, 6)]
    assert other.args[0].tolist() == [[0, 1, 2, 3, 4, 5]]  # token ids stay the example's ids


def test_second_shape_honours_dynamic_sizes_and_grows_by_tiling() -> None:
    inputs = Inputs((torch.arange(4).reshape(1, 4),), {}, ("x",))
    other = second_shape(inputs, ({1: "seq"},), {"seq": 6})
    assert other.args[0].tolist() == [[0, 1, 2, 3, 0, 1]]


def test_dynamo_shapes_replaces_names_with_dim_dynamic() -> None:
    converted = dynamo_shapes(DOC_SPEC)
    assert converted[0] == {0: torch.export.Dim.DYNAMIC}
    assert converted[1] == {"tensor_x": {0: torch.export.Dim.DYNAMIC}}
    assert converted[2] == [{0: torch.export.Dim.DYNAMIC}]


def test_flatten_outputs_nested() -> None:
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    assert [t.item() for t in flatten_outputs((a, {"k": b}, [c]))] == [0.0, 1.0, 2.0]
