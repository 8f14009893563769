"""A custom op whose ONNX translation has the wrong constant: eager adds 1, the translation
adds 2. Plain torch and onnxscript, no harness import, so that a standalone repro script
can load it to define the op (a zoo file would import the harness)."""

from __future__ import annotations

import torch
from onnxscript import opset18 as op
from onnxscript.function_libs.torch_lib.registration import torch_op


def _shift(x: torch.Tensor) -> torch.Tensor:
    return x + 1.0


def _shift_onnx(x):  # type: ignore[no-untyped-def]
    return op.Add(x, op.CastLike(2.0, x))  # the wrong constant: eager adds 1


def define() -> None:
    """Once per process: a zoo file is imported afresh for every cell."""
    try:
        torch.ops.harness_repro.shift  # noqa: B018 - raises where it is not defined yet
        return
    except AttributeError:
        pass
    shift = torch.library.custom_op("harness_repro::shift", _shift, mutates_args=())
    shift.register_fake(torch.empty_like)
    torch_op("harness_repro::shift", trace_only=True)(_shift_onnx)


define()
