"""Failure signatures a maintainer can act on. The record's generic signature is the first
line of the root cause with numbers and paths masked; for the failures that generation-shaped
exports hit, that line is either too long to name the culprit (torch.export's dynamic-shape
errors print the whole spec first) or split one cause into many (an error per input index).
Each kind here gets one signature that says what failed and where, keeping the error type
first, so expectations matching `^ErrorType:` still hold:

- a cache torch.export or TorchScript cannot flatten (which class);
- a guard on a data-dependent expression (which expression);
- a dimension declared dynamic that tracing specialised (which inputs and axes), or that the
  exported graph holds fixed (which dimension names);
- a translation missing (which op);
- a graph onnx.checker's shape inference rejects (which op type and why, not which node:
  the dynamo exporter numbers its nodes per model).

Pure string work on the exception chain: no torch import.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from harness.store.error_text import normalize

Rule = Callable[[str], str | None]


def signature(error: BaseException) -> str | None:
    """`RootErrorType: what` where a rule knows the failure, from the root cause's message
    first and then the messages around it; None where none does (the generic one stands).
    The type is the root cause's, as in the generic signature."""
    chain = list(_chain(error))
    root = chain[-1]
    for exc in (root, *chain[:-1]):
        text = str(exc)
        for rule in RULES:
            found = rule(text)
            if found is not None:
                return f"{type(root).__name__}: {found}"
    return None


def _chain(error: BaseException) -> Iterator[BaseException]:
    """The exception and its causes (`raise ... from`), outermost first."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__


_CLASS = r"<class '(?:[\w.]+\.)?(\w+)'>"
_NOT_FLATTENABLE = re.compile(
    r"Cannot associate shape .*? specified at `(dynamic_shapes[^`]*)` to non-tensor type " + _CLASS,
    re.S,
)
_JIT_INPUT = re.compile(r"supported as JIT inputs/outputs.*?unsupported type: (\w+)", re.S)
_JIT_TRACE = re.compile(r"Type '.*?__torch__\.[\w.]*?(\w+)\]?' cannot be traced")


def cache_not_flattenable(text: str) -> str | None:
    """torch.export given a dynamic spec for an object it cannot flatten (a cache class not
    registered as a pytree node); TorchScript given any such object."""
    if m := _NOT_FLATTENABLE.search(text):
        return f"torch.export cannot flatten {m.group(2)} (not a pytree node) at {m.group(1)}"
    if m := _JIT_INPUT.search(text) or _JIT_TRACE.search(text):
        return (
            f"TorchScript cannot take {m.group(1)} as an input (tensors, tuples, lists, dicts only)"
        )
    return None


_GUARD = re.compile(
    r"(?:Could not guard on|guard on) data-dependent expression (.+?)(?: \(unhinted|\n|$)"
)


def data_dependent_guard(text: str) -> str | None:
    """'Could not guard on data-dependent expression Eq(u0, 1) (unhinted: ...)': the
    expression, its unbacked symbols numbered alike."""
    m = _GUARD.search(text)
    if not m:
        return None
    expression = re.sub(r"\bu\d+\b", "u", m.group(1).strip().rstrip("."))
    return f"data-dependent guard on {expression}"


_INDEX = re.compile(r"\]\[\d+\]")  # a cache tensor's index: ['past_key_values'][3]
# Two ways torch.export says it: a shape computed from a constant ("inferred a static
# shape"), or a guard that fixed the size ("your code specialized it to be a constant").
_SPECIALISED = (
    re.compile(
        r"tracing inferred a static shape of \d+ for dimension inputs(\S*?)\.shape\[(\d+)\]"
    ),
    re.compile(r"You marked L(\S*?)\.size\(\)\[(\d+)\] as dynamic but your code specialized"),
)


def dimension_specialised(text: str) -> str | None:
    """torch.export fixed an axis declared dynamic: the axes, by input (a cache's tensors as
    one, `[*]`)."""
    found = [hit for pattern in _SPECIALISED for hit in pattern.findall(text)]
    if not found:
        return None
    where = sorted({f"inputs{_INDEX.sub('][*]', name)}.shape[{axis}]" for name, axis in found})
    return f"tracing specialised a dynamic dimension: {', '.join(where)}"


_FIXED_IN_GRAPH = re.compile(r"declared-dynamic dimension ([\w, ]+) fixed in the exported graph")


def fixed_in_graph(text: str) -> str | None:
    """The harness's own check of the exported graph (harness.cell.dynamic)."""
    m = _FIXED_IN_GRAPH.search(text)
    return f"{m.group(1)} fixed in the exported graph" if m else None


_NO_FUNCTION = re.compile(
    r"No ONNX function found for <OpOverload\(op='([\w.]+)', overload='(\w+)'\)>"
)


def missing_translation(text: str) -> str | None:
    """The dynamo exporter found no ONNX function for an op (the ATen or custom op)."""
    m = _NO_FUNCTION.search(text)
    if not m:
        return None
    # torchlib has the op, but not for complex tensors (RoPE written with complex numbers)
    complex_only = " (complex input)" if "complex-valued input" in text else ""
    return f"no ONNX translation for {m.group(1)}.{m.group(2)}{complex_only}"


_SHAPE_INFERENCE = re.compile(
    r"\[ShapeInferenceError\] \(op_type:(\w+), node name: [^)\n]*\): ([^\n]*)"
)


def shape_inference(text: str) -> str | None:
    """onnx.checker's shape inference rejected a node: its op type and the complaint, without
    the node's name (`node_conv2d`, `node_Conv_261`, `/layer1/conv/Conv`), which would make one
    cause (a bfloat16 Conv before opset 22) a cluster per model."""
    m = _SHAPE_INFERENCE.search(text)
    if not m:
        return None
    return f"[ShapeInferenceError] (op_type:{m.group(1)}): {normalize(m.group(2))}"


RULES: tuple[Rule, ...] = (
    cache_not_flattenable,
    data_dependent_guard,
    dimension_specialised,
    fixed_in_graph,
    missing_translation,
    shape_inference,
)
