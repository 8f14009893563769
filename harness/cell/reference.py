"""The build and reference stages: the model and its inputs under the seed, and eager's
outputs in float32 and, where the model runs in it, float64 (eager's own noise floor). A
reduced-precision cell's reference is eager at its dtype, with the float32 model's outputs
as its truth (`at_dtype`)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from harness.cell.precision import cast_inputs, cast_model, to_numpy
from harness.cell.shapes import Inputs, flatten_outputs, to_device, to_float64
from harness.cell.stages import stage
from harness.store.records import Dtype
from harness.zoo import ModelSpec
from harness.zoo.spec import SEED


@dataclass
class Reference:
    inputs: Inputs
    outputs: list[np.ndarray]
    # The truth the numerics gate measures eager's own error against: eager in float64,
    # or for a reduced-precision cell the float32 model's outputs.
    outputs64: list[np.ndarray] | None


def build(spec: ModelSpec, device: str) -> tuple[torch.nn.Module, Inputs]:
    with stage("build"):
        torch.manual_seed(SEED)
        model = spec.build().eval()
        torch.manual_seed(SEED)
        args = tuple(spec.example_inputs())
        kwargs = dict(spec.example_kwargs()) if spec.example_kwargs else {}
        params = tuple(inspect.signature(model.forward).parameters)
        inputs = Inputs(args, kwargs, params, tuple(spec.input_names or ()))
        inputs.names()  # a zoo entry naming more or fewer inputs than it gives fails here
        if device != "cpu":
            model, inputs = model.to(device), to_device(inputs, device)
    return model, inputs


class NoOutputs(Exception):
    """The model's forward returns no tensor: there is nothing to export a graph output
    for, and nothing to compare (it is the model's doing, not ONNX Runtime's)."""


def reference(model: torch.nn.Module, inputs: Inputs) -> Reference:
    return Reference(inputs, eager_outputs(model, inputs), reference64(model, inputs))


def eager_outputs(model: torch.nn.Module, inputs: Inputs) -> list[np.ndarray]:
    with stage("reference"), torch.no_grad():
        returned = inputs.call(model)
        outputs = [to_numpy(t) for t in flatten_outputs(returned)]
        if not outputs:
            raise NoOutputs(
                f"the model returns no tensor ({type(returned).__name__}): nothing to compare"
            )
    return outputs


def at_dtype(
    model32: torch.nn.Module, inputs32: Inputs, dtype: Dtype
) -> tuple[torch.nn.Module, Reference]:
    """The cell's model at its dtype and eager's reference there. A float32 cell is the
    zoo's model as it is; a reduced one is a cast copy whose truth is the float32 model's
    outputs (eager in float16 that overflows where float32 does not is eager's error)."""
    with stage("build"):
        model = cast_model(model32, dtype)
    return model, reference_at(model32, model, inputs32, dtype)


def reference_at(
    model32: torch.nn.Module, model: torch.nn.Module, inputs32: Inputs, dtype: Dtype
) -> Reference:
    """Eager's reference for a cell at `dtype` on `inputs32` (the float32 inputs, cast
    here): at float32 with its float64 truth, else with the float32 model's outputs."""
    if not dtype.reduced:
        return reference(model32, inputs32)
    inputs = cast_inputs(inputs32, dtype)
    return Reference(inputs, eager_outputs(model, inputs), eager_outputs(model32, inputs32))


FLOAT64_MAX_PARAM_BYTES = 512 * 1024**2


def reference64(model: torch.nn.Module, inputs: Inputs) -> list[np.ndarray] | None:
    """Eager in float64, eager's own noise floor; None where the model cannot run in it,
    or is so large that a float64 copy would cost more memory than the export itself."""
    if sum(p.numel() * 8 for p in model.parameters()) > FLOAT64_MAX_PARAM_BYTES:
        return None
    try:
        model64 = copy.deepcopy(model).cpu().double()
        with torch.no_grad():
            out = flatten_outputs(to_float64(to_device(inputs, "cpu")).call(model64))
        return [t.detach().numpy() for t in out]
    except Exception:
        return None


def by_name(ref: Reference, names: Sequence[str] | None, wanted: Sequence[str]) -> Reference:
    """Eager's outputs of these names, in this order (a graph that names its own outputs:
    those eager also returns), where eager's are named and hold every one of them."""
    if names is None or not set(wanted) <= set(names):
        return ref
    index = [list(names).index(n) for n in wanted]
    outputs64 = None if ref.outputs64 is None else [ref.outputs64[i] for i in index]
    return replace(ref, outputs=[ref.outputs[i] for i in index], outputs64=outputs64)
