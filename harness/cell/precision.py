"""The dtype axis in a cell (docs/design.md, reduced precision): the model and its floating
inputs cast to the cell's dtype, eager's reference there beside the float32 model's (the
truth a reduced-precision cell is judged against), numpy arrays of torch's dtypes
(bfloat16 as ml_dtypes' type, since numpy has none), and the runtime that has no kernel
for a dtype.

A float32 cell is the zoo's own and goes through unchanged: its truth is eager in float64.
"""

from __future__ import annotations

import copy
import re

import ml_dtypes
import numpy as np
import torch

from harness.cell.shapes import Inputs
from harness.store.records import Dtype

TORCH_DTYPE = {
    Dtype.FLOAT32: torch.float32,
    Dtype.FLOAT16: torch.float16,
    Dtype.BFLOAT16: torch.bfloat16,
}
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


ROUNDING_EPS = 8  # epsilons of a reduced dtype that are its rounding, not a loss


def rounding(dtype: Dtype) -> float:
    """How far from the float32 model's value (relative to the element and to its output's
    largest value) an element at `dtype` may be and still only have been rounded."""
    return ROUNDING_EPS * float(torch.finfo(TORCH_DTYPE[dtype]).eps)


def cast_model(model: torch.nn.Module, dtype: Dtype) -> torch.nn.Module:
    """A copy of `model` with its floating parameters and buffers at `dtype`; the float32
    model is kept for the truth at other shapes."""
    if not dtype.reduced:
        return model
    return copy.deepcopy(model).to(TORCH_DTYPE[dtype])


def cast_inputs(inputs: Inputs, dtype: Dtype) -> Inputs:
    """The floating inputs at `dtype`; integer and bool inputs (token ids, masks) as they are."""
    if not dtype.reduced:
        return inputs
    target = TORCH_DTYPE[dtype]
    return inputs.map_tensors(lambda t: t.to(target) if t.is_floating_point() else t)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor as numpy holds it: bfloat16 as ml_dtypes' bfloat16, the rest as torch's own."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy().view(BFLOAT16)
    return t.numpy()


def is_float(a: np.ndarray) -> bool:
    return bool(np.issubdtype(a.dtype, np.inexact) or a.dtype == BFLOAT16)


class KernelMissing(RuntimeError):
    """ONNX Runtime has no kernel for an op at the types of a reduced-precision graph: the
    runtime's gap, not the exporter's failure (status `runtime_missing`)."""


_NOT_IMPLEMENTED = re.compile(
    r"Could not find an implementation for (\w+)\((\d+)\) node with name '([^']*)'"
)


def kernel_missing(error: BaseException, dtype: str) -> KernelMissing | None:
    """The `KernelMissing` that ORT's NOT_IMPLEMENTED load error says, naming the op."""
    found = _NOT_IMPLEMENTED.search(str(error))
    if found is None:
        return None
    op, version, node = found.groups()
    where = f" (node {node!r})" if node else ""
    return KernelMissing(
        f"onnxruntime has no {dtype} kernel for {op}({version}){where} on this provider"
    )


def input_dtype_problems(graph_types: dict[str, str], inputs: dict[str, np.ndarray]) -> list[str]:
    """The graph inputs whose element type is not the model's (a float32 input where the
    model takes float16 is a silent cast a user pays for at every call)."""
    return [
        f"input {name} is {graph_types[name]} where the model takes {onnx_type_of(a)}"
        for name, a in inputs.items()
        if name in graph_types and graph_types[name] != onnx_type_of(a)
    ]


def onnx_type_of(a: np.ndarray) -> str:
    """ORT's name of a numpy dtype: 'tensor(float16)', 'tensor(bfloat16)'."""
    name = (
        "bfloat16"
        if a.dtype == BFLOAT16
        else {"float32": "float", "float64": "double"}.get(a.dtype.name, a.dtype.name)
    )
    return f"tensor({name})"
