"""The op inventory and the one-op models built from it (issue 5: op coverage).

`build_inventory` exports every zoo model with the dynamo exporter (one real
`torch.onnx.export(..., dynamo=True)` call) and reads the program it translated (after its
decompositions), and notes for each distinct ATen overload the zoo models that use it and
the arguments of its first call: tensors as {shape, dtype} taken from the graph's `node.meta["val"]`, other
arguments as JSON values. `specs_from_inventory` turns each op into an ordinary zoo entry
(family `ops`, named by the overload) whose module calls `torch.ops.<ns>.<op>.<overload>`
with those arguments, so `harness run --suite ops` exports, checks and times each op alone.

The inventory is a committed JSON file (`model_zoo/ops/_inventory.json`), regenerated on
purpose with `harness zoo refresh ops`: discovery stays fast and the op cells
stay the same from run to run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import math
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import torch

from harness.coverage.matrix import BUILTIN_INVENTORY, OPS_FAMILY
from harness.exporters.dynamo import translated_program
from harness.store.error_text import first_line
from harness.zoo.discovery import discover
from harness.zoo.generated.one_op import (
    FLOATS,
    GENERATED_DTYPES,
    OneOp,
    example_inputs,
    model_name,
)
from harness.zoo.op_inventory import Captured, Inventory, Leaf, OpEntry, SkippedOp, Template
from harness.zoo.spec import ModelSpec

INVENTORY_SCHEMA = 1
REFRESH_COMMAND = "harness zoo refresh ops"

# Ops whose output values are uninitialised memory: no two runs agree on them.
_UNINITIALISED = re.compile(
    r"^aten\.(empty|empty_like|empty_strided|new_empty|new_empty_strided)\."
)
_SHAPE_QUERIES = re.compile(r"^aten\.sym_(size|numel|stride|storage_offset)\.")
_NAME_CHARS = re.compile(r"[a-z0-9_.\-]+")  # fullmatch: `$` also matches before a newline


class NotIsolable(Exception):
    """An op call that cannot be rebuilt as a one-op model; the message is the reason."""


# == capture ===================================================================================


@dataclass(frozen=True)
class OpCall:
    """One call of an op in a captured graph: the op's name and its argument template, or
    the reason it cannot be isolated."""

    op: str
    model: str
    node: str
    args: list[Template] | None = None
    kwargs: dict[str, Template] | None = None
    outputs: list[int] | None = None  # the outputs the graph used, where not all of them
    floats: str = "normal"  # how float tensors are drawn (FLOATS)
    skip_reason: str | None = None


@dataclass
class _OpEntry:
    op: str
    models: set[str] = field(default_factory=set)
    calls: int = 0
    first: OpCall | None = None  # the first isolable call
    skip_reason: str | None = None  # why no call could be isolated (the first reason seen)


def op_calls(program: torch.export.ExportedProgram, model: str) -> Iterator[OpCall]:
    """Every call_function node of the program and of its nested graphs (control-flow
    bodies), in graph order."""
    roles = _placeholder_roles(program)
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op == "call_function":
                yield _op_call(node, model, roles if module is program.graph_module else {})


def _placeholder_roles(program: torch.export.ExportedProgram) -> dict[str, str]:
    """Placeholders that hold parameters, buffers or constants: in the one-op model these
    stay module state (ONNX initializers), as they were in the real model."""
    sig = program.graph_signature
    state = {
        **sig.inputs_to_parameters,
        **sig.inputs_to_buffers,
        **sig.inputs_to_lifted_tensor_constants,
    }
    return dict.fromkeys(state, "param")


def op_name(target: object) -> str:
    """'aten.conv2d.default' for an OpOverload; 'operator.getitem' and the like otherwise."""
    if isinstance(target, torch._ops.OpOverload):
        return str(target)
    if isinstance(target, torch._ops.HigherOrderOperator):
        return f"higher_order.{target.name()}"  # type: ignore[no-untyped-call]  # torch's own
    module = getattr(target, "__module__", None) or "python"
    return f"{module.lstrip('_')}.{getattr(target, '__name__', type(target).__name__)}"


def _op_call(node: torch.fx.Node, model: str, roles: dict[str, str]) -> OpCall:
    name = op_name(node.target)
    reason = skip_reason(node.target)
    if reason is not None:
        return OpCall(name, model, node.name, skip_reason=reason)
    try:
        args = [_encode(a, roles) for a in node.args]
        kwargs = {
            k: _encode(v, roles) for k, v in node.kwargs.items() if not isinstance(v, torch.device)
        }
    except NotIsolable as exc:
        return OpCall(name, model, node.name, skip_reason=str(exc))
    return OpCall(name, model, node.name, args, kwargs, _used_outputs(node))


def _used_outputs(node: torch.fx.Node) -> list[int] | None:
    """Of a multi-output op, the outputs the graph takes (`getitem` users): the one-op
    model returns only those, as an unused output (batch norm's saved statistics) is
    never in the real model's ONNX graph either."""
    if not isinstance(node.meta.get("val"), list | tuple) or not node.users:
        return None
    if not all(u.op == "call_function" and u.target is _getitem() for u in node.users):
        return None
    indices = [cast(int, u.args[1]) for u in node.users]
    return sorted({int(i) for i in indices})


def skip_reason(target: object) -> str | None:
    """Why calls of this target cannot become one-op models, judged from the op alone."""
    if target is _getitem():
        return "graph plumbing (takes one output of a multi-output op), not an operator"
    if isinstance(target, torch._ops.HigherOrderOperator):
        return "higher-order operator (control flow): the ops of its bodies are listed on their own"
    if not isinstance(target, torch._ops.OpOverload):
        return "a Python function on symbolic values, not an operator"
    name, schema = str(target), target._schema
    if _SHAPE_QUERIES.match(name):
        return "symbolic shape query"
    if schema.is_mutable or target._overloadname == "out":
        return "in-place or out= variant"
    if _UNINITIALISED.match(name):
        return "returns uninitialised memory: no two runs agree on its values"
    if not schema.returns:
        return "returns nothing"
    if not all(_is_tensor_type(r.type) for r in schema.returns):
        return "returns a non-tensor value (a Python scalar or a size)"
    if not _NAME_CHARS.fullmatch(name.lower()):
        return "its name does not fit a zoo model name"
    return None


def _getitem() -> Callable[..., object]:
    import operator

    return operator.getitem


def _is_tensor_type(t: object) -> bool:
    text = str(t)
    return text in ("Tensor", "Optional[Tensor]", "List[Tensor]", "Tensor[]", "Tensor?")


# -- argument templates -------------------------------------------------------------------------
#
# A template is the call's arguments as JSON: tensors {"tensor": {"shape", "dtype", "role"}},
# dtypes {"dtype": "float32"}, memory formats and layouts likewise, non-finite floats
# {"float": "inf"}; ints, floats, bools, strings, None and lists as themselves. Devices
# are dropped (the one-op model runs where the cell runs).


def _encode(value: object, roles: dict[str, str]) -> Template:
    if isinstance(value, torch.fx.Node):
        return _encode_node(value, roles)
    if isinstance(value, list | tuple):
        return [_encode(v, roles) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": str(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": _dtype_name(value)}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    if isinstance(value, torch.layout):
        return {"layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        raise NotIsolable("takes a device as a positional argument")
    raise NotIsolable(f"takes an argument of type {type(value).__name__}")


def _encode_node(node: torch.fx.Node, roles: dict[str, str]) -> dict[str, Leaf | str]:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        kind = type(val).__name__ if val is not None else "no metadata"
        raise NotIsolable(
            f"argument {node.name} is computed in the graph and is not a tensor ({kind})"
        )
    if not all(isinstance(s, int) for s in val.shape):
        raise NotIsolable(f"argument {node.name} has a data-dependent shape {list(val.shape)}")
    if val.dtype not in GENERATED_DTYPES:
        raise NotIsolable(
            f"argument {node.name} has dtype {_dtype_name(val.dtype)}, not generated here"
        )
    role = roles.get(node.name, "param" if node.op == "get_attr" else "input")
    return {
        "tensor": {
            "shape": [int(s) for s in val.shape],
            "dtype": _dtype_name(val.dtype),
            "role": role,
        }
    }


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# == the inventory =============================================================================


def build_inventory(
    specs: Iterable[ModelSpec], *, progress: Callable[[str], None] | None = None, seed: int = 0
) -> Inventory:
    """Capture each model (seeded, eval mode, its example inputs) and gather its ops."""
    entries: dict[str, _OpEntry] = {}
    models: dict[str, Captured] = {}
    for spec in sorted(specs, key=lambda s: s.name):
        if spec.family == OPS_FAMILY:
            continue  # the one-op models themselves
        try:
            program = _capture(spec, seed)
        except Exception as exc:
            models[spec.name] = {"error": first_line(exc)}
            _say(progress, f"{spec.name}: capture failed: {first_line(exc)}")
            continue
        calls = list(op_calls(program, spec.name))
        for call in calls:
            _add_call(entries, call, seed)
        ops = sorted({c.op for c in calls})
        models[spec.name] = {"ops": len(ops)}
        _say(progress, f"{spec.name}: {len(calls)} calls of {len(ops)} ops")
    return _inventory_json(entries, models)


def _capture(spec: ModelSpec, seed: int) -> torch.export.ExportedProgram:
    torch.manual_seed(seed)
    model = spec.build().eval()
    torch.manual_seed(seed)
    args = tuple(spec.example_inputs())
    kwargs = dict(spec.example_kwargs()) if spec.example_kwargs else {}
    with _quiet():
        return translated_program(model, args, kwargs)


def _add_call(entries: dict[str, _OpEntry], call: OpCall, seed: int) -> None:
    entry = entries.setdefault(call.op, _OpEntry(call.op))
    entry.models.add(call.model)
    entry.calls += 1
    if entry.first is not None:
        return
    reason, floats = call.skip_reason, FLOATS[0]
    if reason is None:
        reason, floats = _eager_check(call, seed)
    if reason is None:
        entry.first, entry.skip_reason = dataclasses.replace(call, floats=floats), None
    elif entry.skip_reason is None:
        entry.skip_reason = reason


def _eager_check(call: OpCall, seed: int) -> tuple[str | None, str]:
    """Run the one-op model in eager: it must run, and give the same values twice on the
    same inputs (random ops cannot be compared with ONNX Runtime). Float tensors are
    standard normal unless that makes the outputs non-finite (log, rsqrt, a mask times
    finfo.min), then uniform in [0, 1): (the problem or None, the float inputs to use)."""
    for floats in FLOATS:
        try:
            first, second = (_eager_outputs(call, floats, seed, seed + k) for k in (1, 2))
        except Exception as exc:
            return f"does not run in isolation: {first_line(exc)}", floats
        same = len(first) == len(second) and all(
            a.shape == b.shape and torch.equal(_comparable(a), _comparable(b))
            for a, b in zip(first, second, strict=True)
        )
        if not same:
            return "random: two eager calls with the same inputs differ", floats
        if all(torch.isfinite(t).all() for t in first if t.is_floating_point()):
            return None, floats
    return None, FLOATS[0]


def _eager_outputs(call: OpCall, floats: str, seed: int, call_seed: int) -> list[torch.Tensor]:
    args, kwargs = call.args or [], call.kwargs or {}
    torch.manual_seed(seed)
    module = OneOp(call.op, args, kwargs, call.outputs, floats)
    torch.manual_seed(seed)
    inputs = example_inputs(args, kwargs, floats)
    torch.manual_seed(call_seed)  # a different RNG state per call: random ops differ
    with torch.no_grad(), _quiet():
        return _flat(module(*inputs))


def _flat(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _flat(v)]
    return []


def _comparable(t: torch.Tensor) -> torch.Tensor:
    return torch.nan_to_num(t, nan=0.0) if t.is_floating_point() else t


def _inventory_json(entries: dict[str, _OpEntry], models: dict[str, Captured]) -> Inventory:
    ops: list[OpEntry] = []
    skipped: list[SkippedOp] = []
    for name in sorted(entries):
        e = entries[name]
        models_of, calls = sorted(e.models), e.calls
        if e.first is None:
            skipped.append(
                {"op": name, "reason": e.skip_reason, "models": models_of, "calls": calls}
            )
            continue
        ops.append(
            {
                "op": name,
                "name": model_name(name),
                "models": models_of,
                "calls": calls,
                "first_call": {"model": e.first.model, "node": e.first.node},
                "args": e.first.args or [],  # an isolable call has both
                "kwargs": e.first.kwargs or {},
                "outputs": e.first.outputs,
                "floats": e.first.floats,
            }
        )
    return {
        "schema": INVENTORY_SCHEMA,
        "about": f"ATen ops of the zoo's captured graphs, one-op model templates; regenerate with `{REFRESH_COMMAND}`",
        "torch": torch.__version__,
        "models": dict(sorted(models.items())),
        "ops": ops,
        "skipped": skipped,
    }


def refresh(
    zoo_paths: Sequence[Path] = (),
    patterns: Sequence[str] = (),
    *,
    out: Path | None = None,
    say: Callable[[str], None] = print,
) -> str:
    """Capture the zoo's models (the built-in zoo and `zoo_paths`; those `patterns` select,
    where given) and write the inventory to `out` (default: the ops zoo's own). The
    summary line."""
    zoo = discover(list(zoo_paths))
    specs = zoo.select(list(patterns)) if patterns else list(zoo.models.values())
    for problem in zoo.problems:
        say(f"warning: zoo file {problem.source} failed to import: {problem.error}")
    path = out or BUILTIN_INVENTORY
    inventory = build_inventory(specs, progress=say)
    write_inventory(inventory, path)
    failed = [name for name, m in inventory["models"].items() if "error" in m]
    return (
        f"{len(inventory['ops'])} ops with a one-op model, {len(inventory['skipped'])} not isolated, "
        f"from {len(inventory['models']) - len(failed)} models"
        + (f" ({len(failed)} could not be captured: {', '.join(failed)})" if failed else "")
        + f" -> {path}"
    )


def write_inventory(inventory: Inventory, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(inventory, indent=1, allow_nan=False) + "\n")


def read_inventory(path: Path) -> Inventory:
    inventory: Inventory = json.loads(path.read_text())
    if inventory.get("schema") != INVENTORY_SCHEMA:
        raise ValueError(
            f"{path}: inventory schema {inventory.get('schema')!r}, this harness reads {INVENTORY_SCHEMA}; "
            f"regenerate it with `{REFRESH_COMMAND}`"
        )
    return inventory


def _say(progress: Callable[[str], None] | None, line: str) -> None:
    if progress is not None:
        progress(line)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """torch.export and the exporter print and warn a lot; the inventory's log is ours."""
    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)
