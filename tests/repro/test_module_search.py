"""The module-level search on hand-made trees and oracles (no export): which modules are
tried in which order, where the descent stops, what is replaced by identity."""

from __future__ import annotations

import torch

from harness.cell.shapes import Inputs
from harness.repro.modules import (
    Kept,
    PassThrough,
    descend,
    exported_as,
    nearest_called,
    record_calls,
    thin,
)


class Pair(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.items = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
        self.out = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
        for item in self.items:
            x = item(x) * scale
        return self.out(x)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = Pair(), Pair()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.first(x, scale=2.0) + self.second(x)


def test_each_called_module_is_recorded_once_with_its_kwargs_and_output_shape() -> None:
    x = torch.rand(3, 4)
    calls = record_calls(Model(), Inputs((x,), {}))
    assert set(calls) == {
        "", "first", "second", "first.items.0", "first.items.1", "first.out",
        "second.items.0", "second.items.1", "second.out",
    }  # fmt: skip
    assert calls["first"].inputs.kwargs == {"scale": 2.0}
    assert calls["first.out"].output == ((3, 2), torch.float32)
    assert torch.equal(calls[""].inputs.args[0], x) and calls[""].inputs.args[0] is not x


def test_the_nearest_called_modules_skip_the_containers_never_called() -> None:
    calls = dict.fromkeys(["", "a", "a.items.0", "a.items.1", "a.items.1.fc", "b"])
    assert nearest_called("", calls) == ["a", "b"]  # type: ignore[arg-type]
    assert nearest_called("a", calls) == ["a.items.0", "a.items.1"]  # type: ignore[arg-type]
    assert nearest_called("a.items.0", calls) == []  # type: ignore[arg-type]


def test_the_descent_tries_the_smallest_first_and_stops_where_no_child_fails() -> None:
    calls = dict.fromkeys(["", "big", "small", "big.x", "big.y", "small.z"])
    sizes = {"big": 100, "small": 10, "big.x": 60, "big.y": 40, "small.z": 5, "": 110}
    tried: list[str] = []

    def fails(path: str) -> bool:
        tried.append(path)
        return path in {"big", "big.x"}

    kept = descend(calls, sizes, fails, lambda: False)  # type: ignore[arg-type]
    assert kept.path == "big.x" and kept.complete
    assert tried == ["small", "big", "big.y", "big.x"]
    assert kept.tests == 4


def test_the_descent_stops_at_the_bound_with_what_it_has() -> None:
    calls = dict.fromkeys(["", "a", "a.b"])
    clock = iter([False, True])
    kept = descend(calls, {"a": 1, "a.b": 1}, lambda p: True, lambda: next(clock))  # type: ignore[arg-type]
    assert (kept.path, kept.complete, kept.tests) == ("a", False, 1)


def test_items_are_replaced_by_identity_while_the_failure_persists() -> None:
    model = Model()
    calls = record_calls(model, Inputs((torch.rand(3, 4),), {}))
    keep = model.first.items[0]

    def fails(path: str) -> bool:  # the failure needs first.items.0
        return model.get_submodule(path).items[0] is keep

    kept = thin(model, Kept("first"), calls, fails, lambda: False)
    assert kept.replaced == ["first.items.1"]
    assert isinstance(model.first.items[1], torch.nn.Identity) and model.first.items[0] is keep
    assert kept.tests == 2  # first.out changes the shape: never tried


class Layer(torch.nn.Module):
    """A transformers-like layer: keyword arguments in, a tuple out."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, *, mask: torch.Tensor) -> tuple[torch.Tensor]:
        return (self.fc(x) * mask,)


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(), Layer()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask=torch.ones_like(x))[0]
        return x


def test_an_item_called_with_keywords_that_returns_a_tuple_gets_a_pass_through() -> None:
    model = Encoder()
    x = torch.rand(3, 4)
    calls = record_calls(model, Inputs((x,), {}))
    assert calls["layers.0"].tuple_out and calls["layers.0"].output == ((3, 4), torch.float32)
    kept = thin(model, Kept(""), calls, lambda path: True, lambda: False)
    assert kept.replaced == ["layers.1", "layers.0"]
    assert all(isinstance(m, PassThrough) and m.tuple_out for m in model.layers)
    assert torch.equal(model(x), x)  # the encoder still runs, its layers gone


class Chunked(torch.nn.Module):
    """Passes its length on as a number: its `Pair` cannot be exported dynamic alone."""

    def __init__(self) -> None:
        super().__init__()
        self.pair = Pair()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pair(x, scale=float(x.shape[1]))


def test_the_axes_that_change_at_the_second_shape_are_each_calls_dynamic_axes() -> None:
    model = Model()
    here, there = Inputs((torch.rand(3, 5, 4),), {}), Inputs((torch.rand(1, 2, 4),), {})
    calls = record_calls(model, here, there)
    assert calls[""].dynamic == ((0, 1),)  # batch 3 -> 1, sequence 5 -> 2
    assert calls["first.items.0"].dynamic == ((0, 1),) and calls["first.out"].standalone
    # an axis of size 1 in the example stays static (torch.export would specialise it)
    ones = record_calls(model, Inputs((torch.rand(1, 5, 4),), {}), there)
    assert ones[""].dynamic == ((1,),)
    chunked = record_calls(Chunked(), here, there)
    assert chunked[""].standalone and not chunked["pair"].standalone  # its scale changed
    assert chunked["pair.items.0"].standalone and chunked["pair.items.0"].dynamic == ((0, 1),)


def test_a_dynamic_call_exports_its_tensors_through_a_call_with_their_axes() -> None:
    """torch.export takes the wrapper's `*tensors` with one spec per tensor (whatever the
    structure the module was called with: keywords, caches); TorchScript the same axes."""
    model = Model()
    calls = record_calls(
        model, Inputs((torch.rand(2, 5, 4),), {}), Inputs((torch.rand(1, 2, 4),), {})
    )
    module, tensors, spec = exported_as(model.first, calls["first"], "dynamo")
    assert type(module).__name__ == "KeywordCall" and len(tensors.args) == 1
    assert spec == {"tensors": ({0: "input_0_0", 1: "input_0_1"},)}
    torchscript = exported_as(model.first, calls["first"], "torchscript")
    assert torchscript[2] == ({0: "input_0_0", 1: "input_0_1"},)
    static = record_calls(model, Inputs((torch.rand(2, 5, 4),), {}))
    module, given, spec = exported_as(model.first, static["first"], "dynamo")
    assert module is model.first and given.kwargs == {"scale": 2.0} and spec is None
