"""Failure signatures a maintainer can act on (harness/cell/failures.py), from the real
errors torch.export, TorchScript and the dynamo exporter raise here: a cache that cannot be
flattened (which class), a data-dependent guard (which expression), a dimension declared
dynamic that tracing specialised (which input and axis), a translation missing (which op).
The error type stays first, so expectations matching `^ErrorType:` still hold."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
import torch
from torch.export import Dim

from harness import exporters
from harness.cell import failures
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.exporters.request import ExportRequest
from harness.store.error_text import root_cause


class _Unregistered:
    """A cache-like container no pytree registration knows."""

    def __init__(self, keys: torch.Tensor) -> None:
        self.keys = keys


class _TakesCache(torch.nn.Module):
    def forward(self, x: torch.Tensor, cache: _Unregistered) -> torch.Tensor:
        return x + cache.keys.sum()


def _raised(call: object) -> BaseException:
    try:
        call()  # type: ignore[operator]
    except Exception as exc:
        return exc
    raise AssertionError("expected the call to fail")


def test_a_cache_torch_export_cannot_flatten_is_named() -> None:
    cache = _Unregistered(torch.ones(2, 4))
    error = _raised(
        lambda: torch.export.export(
            _TakesCache(),
            (torch.ones(2, 4), cache),
            dynamic_shapes=({0: Dim.DYNAMIC}, [{0: Dim.DYNAMIC}]),
        )
    )
    assert failures.signature(error) == (
        f"{type(root_cause(error)).__name__}: torch.export cannot flatten _Unregistered"
        " (not a pytree node) at dynamic_shapes[1]"
    )


@pytest.mark.parametrize("exporter", ["torchscript", "torchscript-script"])
def test_a_cache_torchscript_cannot_take_is_named(exporter: str, tmp_path: Path) -> None:
    cache = _Unregistered(torch.ones(2, 4))
    inputs = Inputs((torch.ones(2, 4), cache), {})
    request = ExportRequest(_TakesCache(), inputs, 18, tmp_path / "m.onnx", output_names=("y",))
    with pytest.raises(StageFailure) as failed:
        exporters.get(exporter).export(request)
    assert failures.signature(failed.value.error) == (
        "RuntimeError: TorchScript cannot take _Unregistered as an input"
        " (tensors, tuples, lists, dicts only)"
    )


class _DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.nonzero().shape[0] == 1:  # a branch on a value only known when it runs
            return x * 2
        return x


def test_a_data_dependent_guard_names_its_expression() -> None:
    error = _raised(lambda: torch.export.export(_DataDependent(), (torch.ones(4),)))
    found = failures.signature(error)
    assert found is not None and found.startswith(f"{type(root_cause(error)).__name__}: ")
    assert found.endswith("data-dependent guard on Eq(u, 1)"), found


class _FixesBatch(torch.nn.Module):
    def forward(self, x: torch.Tensor, past: torch.Tensor) -> torch.Tensor:
        if past.shape[2] == 5:  # tracing keeps this branch: the past length becomes 5
            return x + past.sum()
        return x


def test_a_dimension_tracing_specialised_names_the_input_and_axis() -> None:
    error = _raised(
        lambda: torch.export.export(
            _FixesBatch(),
            (torch.ones(2, 3), torch.ones(2, 4, 5, 8)),
            dynamic_shapes=({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC, 2: Dim.DYNAMIC}),
        )
    )
    assert failures.signature(error) == (
        "UserError: tracing specialised a dynamic dimension: inputs['past'].shape[2]"
    )


def test_a_cache_tensor_index_groups_alike() -> None:
    text = (
        "but tracing inferred a static shape of 5 for dimension inputs['past_key_values'][0].shape[2].\n"
        "but tracing inferred a static shape of 5 for dimension inputs['past_key_values'][3].shape[2]."
    )
    assert failures.dimension_specialised(text) == (
        "tracing specialised a dynamic dimension: inputs['past_key_values'][*].shape[2]"
    )


class _CumMax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cummax(x, dim=1)[0]


def test_a_missing_translation_names_the_op(tmp_path: Path) -> None:
    request = ExportRequest(
        _CumMax(), Inputs((torch.ones(2, 3),), {}), 18, tmp_path / "m.onnx", output_names=("y",)
    )
    with pytest.raises(StageFailure) as failed:
        exporters.get("dynamo").export(request)
    found = failures.signature(failed.value.error)
    assert found is not None and found.endswith("no ONNX translation for aten.cummax.default")


def test_a_translation_missing_for_complex_inputs_says_so() -> None:
    text = (
        "No ONNX function found for <OpOverload(op='aten.unsqueeze', overload='default')>."
        " Failure message: No decompositions registered for the complex-valued input"
    )
    assert failures.missing_translation(text) == (
        "no ONNX translation for aten.unsqueeze.default (complex input)"
    )


class _ConvBn(torch.nn.Module):
    def __init__(self, bn: bool) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4) if bn else torch.nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


def test_a_checker_failure_groups_across_node_names(tmp_path: Path) -> None:
    """A bfloat16 Conv at opset 18 (ONNX's Conv takes bfloat16 from opset 22): one signature
    whatever the node is called (dynamo's node_conv2d, node_Conv_N after folding a BatchNorm,
    TorchScript's /conv/Conv)."""
    found = set()
    for exporter, bn in (("dynamo", False), ("dynamo", True), ("torchscript", False)):
        path = tmp_path / f"{exporter}{bn}.onnx"
        model = _ConvBn(bn).eval().to(torch.bfloat16)
        x = torch.ones(1, 3, 8, 8, dtype=torch.bfloat16)
        torch.onnx.export(model, (x,), str(path), dynamo=exporter == "dynamo", opset_version=18)
        error = _raised(lambda: onnx.checker.check_model(str(path), full_check=True))  # noqa: B023
        found.add(failures.signature(error))
    assert found == {
        "InferenceError: [ShapeInferenceError] (op_type:Conv): X typestr: T, has unsupported"
        " type: tensor(bfloat16)"
    }


def test_other_failures_keep_the_generic_signature() -> None:
    assert failures.signature(ValueError("something else entirely")) is None
