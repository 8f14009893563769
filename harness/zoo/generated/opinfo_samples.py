"""The samples of one OpInfo at one dtype, as the small models a sampled cell runs.

torch's OpInfo database (`torch.testing._internal.common_methods_invocations.op_db`) is
imported here only, inside a cell's build (about 3 s; a worker's zygote imports it once,
as an entry's requirement, before it forks each cell). Each sample `op(sample.input, *sample.args, **sample.kwargs)`
becomes a module whose forward takes the sample's tensors (the leaves of that call, in
`torch.utils._pytree` order) and rebuilds the call around them; every other leaf
(numbers, dtypes, shapes, strings) stays a constant of the module, as in a user's model.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch.utils import _pytree as pytree

from harness.zoo.spec import SEED, Sample, SampleSet

if TYPE_CHECKING:
    from torch.testing._internal.opinfo.core import DecorateInfo, OpInfo, SampleInput

# Where an OpInfo declares no tolerance of its own: the harness's float32 default, and
# the one-op models' low-precision ones (harness.zoo.generated.one_op).
DEFAULT_TOLERANCES = {
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}
# OpInfos whose outputs are uninitialised memory: only shapes and dtypes are compared.
UNINITIALISED = re.compile(r"^(empty|empty_like|empty_strided|empty_permuted|new_empty.*)$")
# The test classes of torch's OpInfo suite that compare an op's forward values with a
# reference implementation (numpy, a Python reference): the toleranceOverride of their
# reference tests (`test_numpy_refs`, `test_reference_numerics_*`, `test_ref_*`, ...), or
# of the whole class, is the op's own tolerance against another implementation, as here.
# Other classes judge something else with other bounds (TestDecomp a decomposition at
# 5e-3, TestInductorOpInfo compiled code, TestConsistency MPS, TestJit, functorch), and
# the classes' self-consistency tests (test_noncontiguous_samples, test_out) compare the
# op with itself, tighter than against another implementation.
FORWARD_VALUE_TESTS = frozenset(
    {
        "TestCommon",
        "TestUnaryUfuncs",
        "TestBinaryUfuncs",
        "TestBinaryUfuncsDevice",
        "TestReductions",
        "TestMasked",
    }
)
_REFERENCE_TEST = re.compile(r"ref")
# Reference tests about gradients or another device than the CPU compared here.
_NOT_HERE = re.compile(r"grad|backward|vjp|jvp|forward_ad|fwgrad|mps|cuda|xpu")


class _Slot:
    """Where a sample's tensor goes back into the call (None is a constant like any other)."""

    def __repr__(self) -> str:
        return "<tensor>"


TENSOR = _Slot()


@functools.cache
def op_db_index() -> dict[tuple[str, str], OpInfo]:
    """(name, variant_test_name) -> OpInfo; imports op_db once per process."""
    from torch.testing._internal.common_methods_invocations import op_db

    return {(op.name, op.variant_test_name): op for op in op_db}


def find_opinfo(name: str, variant: str = "") -> OpInfo:
    try:
        return op_db_index()[(name, variant)]
    except KeyError:
        full = f"{name} ({variant})" if variant else name
        raise LookupError(f"no OpInfo {full} in this torch's op_db") from None


def dtype_of(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def sample_set(name: str, variant: str, dtype_name: str, *, max_samples: int) -> SampleSet:
    """The OpInfo's CPU samples at the dtype, deterministic under the seed; beyond
    `max_samples`, that many spread evenly over them (the first and the last included)."""
    op = find_opinfo(name, variant)
    dtype = dtype_of(dtype_name)
    reseed()
    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))  # type: ignore[no-untyped-call]  # torch's OpInfo is untyped
    chosen = spread(len(samples), max_samples)
    tolerance, source = tolerance_of(op, dtype)
    compare_values = not UNINITIALISED.match(name)
    return SampleSet(
        tuple(
            to_sample(op, i, samples[i], tolerance, source, compare_values=compare_values)
            for i in chosen
        ),
        total=len(samples),
    )


def reseed() -> None:
    """Sample generators draw from torch's, Python's and numpy's generators."""
    torch.manual_seed(SEED)
    random.seed(SEED)
    np.random.seed(SEED)


def spread(total: int, cap: int) -> list[int]:
    """Indices of `cap` samples out of `total`, evenly spaced, first and last included
    (every sample where `cap` is 0)."""
    if total <= cap or cap <= 0:
        return list(range(total))
    if cap == 1:
        return [0]
    return sorted({round(k * (total - 1) / (cap - 1)) for k in range(cap)})


def tolerance_of(op: OpInfo, dtype: torch.dtype) -> tuple[tuple[float, float] | None, str]:
    """The OpInfo's own (rtol, atol) for forward values at `dtype` on CPU, and where it comes
    from: the loosest `toleranceOverride` of the forward-value test classes that applies
    (one for every test class counts too), its rtol and atol together; else the harness's default for the dtype (None for
    integer and bool dtypes: float outputs are then compared at the float32 default)."""
    from torch.testing._internal.common_device_type import toleranceOverride
    from torch.testing._internal.opinfo.core import DecorateInfo

    found: list[tuple[float, float, str]] = []
    for info in op.decorators or ():
        if not isinstance(info, DecorateInfo) or not _judges_forward_values(info, dtype):
            continue
        for decorator in info.decorators:
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                tol = decorator.d[dtype]
                found.append((float(tol.rtol), float(tol.atol), _test_of(info)))
    if found:
        rtol, atol, where = max(found)  # the loosest, as a whole: one test's bound
        return (rtol, atol), f"toleranceOverride of {op_label(op)} for {where}"
    default = DEFAULT_TOLERANCES.get(dtype)
    return default, f"the harness's default for {str(dtype).removeprefix('torch.')}"


def _judges_forward_values(info: DecorateInfo, dtype: torch.dtype) -> bool:
    """A DecorateInfo that applies to a forward-value test on CPU at `dtype`."""
    if info.device_type not in (None, "cpu") or (
        info.dtypes is not None and dtype not in info.dtypes
    ):
        return False
    if info.cls_name is not None and info.cls_name not in FORWARD_VALUE_TESTS:
        return False
    test = info.test_name
    if test is not None and (not _REFERENCE_TEST.search(test) or _NOT_HERE.search(test)):
        return False
    return _active(info)


def _test_of(info: DecorateInfo) -> str:
    """'TestUnaryUfuncs.test_reference_numerics_normal', 'TestCommon (every test)'."""
    if info.cls_name is None:
        return "every test"
    return (
        f"{info.cls_name}.{info.test_name}" if info.test_name else f"{info.cls_name} (every test)"
    )


def op_label(op: OpInfo) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _active(info: DecorateInfo) -> bool:
    active = info.active_if
    return bool(active() if callable(active) else active)


def to_sample(
    op: OpInfo,
    index: int,
    sample: SampleInput,
    tolerance: tuple[float, float] | None,
    tolerance_source: str | None = None,
    *,
    compare_values: bool,
) -> Sample:
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    tensors = tuple(leaf for leaf in leaves if isinstance(leaf, torch.Tensor))
    constants = tuple(TENSOR if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves)
    label = op.name + (f"_{op.variant_test_name}" if op.variant_test_name else "")
    return Sample(
        index=index,
        build=functools.partial(sample_module, op.op, spec, constants, label),
        inputs=tensors,
        tolerance=tolerance,
        tolerance_source=tolerance_source,
        compare_values=compare_values,
        description=describe(sample),
    )


class SampleModule(torch.nn.Module):
    """forward(*tensors) = op(input, *args, **kwargs) with the tensors put back in place;
    returns the tensors of the op's result, flattened (what the ONNX graph outputs)."""

    def __init__(
        self, op: Callable[..., object], spec: pytree.TreeSpec, constants: tuple[object, ...]
    ) -> None:
        super().__init__()
        self.op = op
        self.spec = spec
        self.constants = constants

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        given = iter(tensors)
        leaves = [next(given) if c is TENSOR else c for c in self.constants]
        sample_input, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        result = self.op(sample_input, *args, **kwargs)
        if isinstance(result, torch.Tensor):
            return result
        return tuple(t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor))


def sample_module(
    op: Callable[..., object], spec: pytree.TreeSpec, constants: tuple[object, ...], label: str
) -> SampleModule:
    """A module of a class of its own (torch.jit and torch.export keep per-class state; a
    worker runs many cells), named after the OpInfo."""
    name = "OpInfo_" + re.sub(r"\W", "_", label)
    cls: type[SampleModule] = type(name, (SampleModule,), {})
    return cls(op, spec, constants)


def describe(sample: SampleInput) -> str:
    """'input float32[3, 4]; args (1,); kwargs {keepdim: True}', for failure listings."""

    def text(value: object) -> str:
        if isinstance(value, torch.Tensor):
            return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
        if isinstance(value, list | tuple):
            inner = ", ".join(text(v) for v in value)
            return f"[{inner}]" if isinstance(value, list) else f"({inner})"
        if isinstance(value, dict):
            return "{" + ", ".join(f"{k}: {text(v)}" for k, v in value.items()) + "}"
        return repr(value)

    parts = [f"input {text(sample.input)}"]
    if sample.args:
        parts.append(f"args {text(tuple(sample.args))}")
    if sample.kwargs:
        parts.append(f"kwargs {text(dict(sample.kwargs))}")
    return "; ".join(parts)[:200]
