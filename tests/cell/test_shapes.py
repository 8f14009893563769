from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree

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


# -- graph input names, and containers registered as pytree nodes (a KV cache) ------------------


def test_inputs_carry_the_entrys_graph_input_names_or_number_them() -> None:
    ids, mask = torch.zeros(2, 5, dtype=torch.long), torch.ones(2, 5)
    assert Inputs((ids, mask), {}).names() == ["input_0", "input_1"]
    named = Inputs((ids, mask), {}, ("ids", "mask"), ("input_ids", "attention_mask"))
    assert named.names() == ["input_ids", "attention_mask"]
    # Resizing keeps the names; TorchScript's dynamic_axes are keyed by them.
    assert second_shape(named, ({0: "batch"}, {0: "batch"}), None).names() == named.names()
    axes = dynamic_axes(named, ({0: "batch", 1: "seq"}, {0: "batch"}))
    assert axes == {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch"}}


def test_an_entry_naming_more_inputs_than_it_gives_is_told_so() -> None:
    with pytest.raises(ValueError, match=r"names 3 graph inputs .* hold 2 tensors"):
        Inputs((torch.zeros(1), torch.zeros(1)), {}, (), ("a", "b", "c")).names()


class _Cache:
    """A stand-in for transformers' DynamicCache: a container the model grows in place."""

    def __init__(self, keys: list[torch.Tensor]) -> None:
        self.keys = keys
        self.length = keys[0].shape[1]

    def update(self, new: torch.Tensor) -> None:
        self.keys = [torch.cat([k, new], dim=1) for k in self.keys]


@pytest.fixture(scope="module")
def registered_cache() -> type[_Cache]:
    # Registered once per process, as transformers' export helpers register their caches.
    if _Cache not in pytree.SUPPORTED_NODES:
        pytree.register_pytree_node(
            _Cache, lambda c: (list(c.keys), None), lambda keys, _: _Cache(list(keys))
        )
    return _Cache


class _Grows(torch.nn.Module):
    def forward(self, x: torch.Tensor, cache: _Cache) -> torch.Tensor:
        cache.update(x)  # like a KV cache layer's update: the container changes
        return torch.cat(cache.keys, dim=1).sum(dim=1)


def test_a_registered_container_flattens_into_its_tensors(registered_cache: type[_Cache]) -> None:
    cache = registered_cache([torch.ones(2, 3), torch.zeros(2, 3)])
    inputs = Inputs((torch.ones(2, 1), cache), {}, ("x", "cache"))
    assert [tuple(t.shape) for t in inputs.leaves()] == [(2, 1), (2, 3), (2, 3)]
    spec = ({0: "batch"}, [{0: "batch", 1: "past"}, {0: "batch", 1: "past"}])
    assert dynamic_axes(inputs, spec) == {
        "input_0": {0: "batch"},
        "input_1": {0: "batch", 1: "past"},
        "input_2": {0: "batch", 1: "past"},
    }
    doubled = inputs.map_tensors(lambda t: t * 2)
    assert isinstance(doubled.args[1], registered_cache)
    assert doubled.args[1].keys[0].tolist() == [[2.0] * 3] * 2
    assert cache.keys[0].tolist() == [[1.0] * 3] * 2  # the original is left alone


def test_each_eager_call_gets_the_inputs_as_they_were(registered_cache: type[_Cache]) -> None:
    """A model that grows its cache in place must not see the previous call's growth: the
    reference, the float64 reference and the timed loop all run the graph's inputs."""
    cache = registered_cache([torch.ones(1, 2)])
    inputs = Inputs((torch.ones(1, 1), cache), {})
    first, second = inputs.call(_Grows()), inputs.call(_Grows())
    assert first.tolist() == second.tolist() == [3.0]
    assert cache.keys[0].shape == (1, 2)
