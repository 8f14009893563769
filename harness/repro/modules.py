"""Module-level minimisation (issue 37): for failures the graph minimizer cannot take (a
capture failure, a mismatch made at capture, a failure in TorchScript's own trace), the
smallest submodule of the model that still fails the cell's way on its own.

One eager forward records each submodule's inputs (forward pre-hooks, with kwargs). Then,
down the module tree from the model: of the submodules a failing module calls directly
(its nearest called descendants), smallest first, the first whose own export (with its
recorded inputs, by the cell's exporter, through the cell's stages) fails the same way
becomes the next; the search stops where none does. Inside the one kept, the items of a
`ModuleList` or `Sequential` that map a tensor to one of the same shape are replaced by
`torch.nn.Identity`, last first, while the failure persists.

A dynamic cell's failure may need its dynamic dimensions (torch.export specialising one): the
forward is recorded again at the cell's second shape, and each module is exported with the
axes of its inputs whose size changed marked dynamic. A module given a number that changed
with the shape (a length passed as an int) cannot be exported dynamic by itself: the search
goes past it to its children.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

from harness.cell import failures
from harness.cell.numerics import check_output
from harness.cell.shapes import Inputs, flatten_outputs, to_float64
from harness.cell.stages import StageFailure
from harness.repro.oracle import Target, through_stages
from harness.store.error_text import SIZE_SYMBOL, signature_of
from harness.store.status import Stage
from harness.zoo.spec import DynamicShapes

KEYWORDS_BOUND_BY = "torchscript"  # the exporter that makes keyword inputs positional


@dataclass
class Call:
    """A submodule's first call in the model's forward: what it was given (copies), and
    the shape and dtype of what it returned where that was one tensor."""

    inputs: Inputs
    output: tuple[tuple[int, ...], torch.dtype] | None = None
    tuple_out: bool = False  # the tensor was the first item of a tuple it returned
    # A dynamic cell's: per tensor input (in export order), the axes whose size changed at
    # the cell's second shape, which its export marks dynamic; None for a static cell.
    dynamic: tuple[tuple[int, ...], ...] | None = None
    standalone: bool = True  # False: a number it was given changed with the shape


def record_calls(
    model: torch.nn.Module, inputs: Inputs, second: Inputs | None = None
) -> dict[str, Call]:
    """Each submodule's first call during one eager forward, by its path in the model; with
    `second` (a dynamic cell's second shape), which of its inputs' axes are dynamic."""
    calls = _first_calls(model, inputs)
    if second is not None:
        there = _first_calls(model, second)
        for path, call in calls.items():
            other = there.get(path)
            call.dynamic = None if other is None else varying(call.inputs, other.inputs)
            call.standalone = call.dynamic is not None
    return calls


def varying(here: Inputs, there: Inputs) -> tuple[tuple[int, ...], ...] | None:
    """Per tensor of `here`, the axes whose size differs in `there` (an axis of size 0 or 1
    here stays static: torch.export specialises those); None where the two calls differ in
    structure or in a number they were given."""
    mine, theirs = here.leaves(), there.leaves()
    if _numbers(here) != _numbers(there) or [t.dim() for t in mine] != [t.dim() for t in theirs]:
        return None
    return tuple(
        tuple(
            axis for axis in range(a.dim()) if a.shape[axis] != b.shape[axis] and a.shape[axis] > 1
        )
        for a, b in zip(mine, theirs, strict=True)
    )


def _numbers(inputs: Inputs) -> list[object]:
    """The numbers among a call's inputs (sizes, flags): what a shape may change besides
    its tensors."""
    return [
        x for x in pytree.tree_leaves((inputs.args, inputs.kwargs)) if isinstance(x, int | float)
    ]


def _first_calls(model: torch.nn.Module, inputs: Inputs) -> dict[str, Call]:
    names = {id(m): name for name, m in model.named_modules()}
    calls: dict[str, Call] = {}

    def before(module: torch.nn.Module, args: Any, kwargs: Any) -> None:
        name = names.get(id(module))
        if name is not None and name not in calls:
            given = Inputs(tuple(args), dict(kwargs)).map_tensors(lambda t: t.detach().clone())
            calls[name] = Call(given)

    def after(module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        call = calls.get(names.get(id(module), ""))
        first = output[0] if isinstance(output, tuple) and output else output
        if call is not None and call.output is None and isinstance(first, torch.Tensor):
            call.output = (tuple(first.shape), first.dtype)
            call.tuple_out = first is not output

    handles = []
    for module in model.modules():
        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
    try:
        with torch.no_grad():
            inputs.call(model)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def height(module: torch.nn.Module) -> int:
    """Levels of the module tree: 1 for a module without children."""
    return 1 + max((height(c) for c in module.children()), default=0)


def nearest_called(path: str, calls: dict[str, Call]) -> list[str]:
    """The called submodules under `path` with no called module between (pure)."""
    prefix = f"{path}." if path else ""
    under = [p for p in calls if p != path and p.startswith(prefix)]
    return [p for p in under if not any(p.startswith(f"{q}.") for q in under if q != p)]


# -- does a module still fail the cell's way? ------------------------------------------------


def judged_inputs(call: Call) -> Inputs:
    """The recorded inputs with the graph inputs named input_0, input_1, ... (as the
    script names them)."""
    count = len(call.inputs.leaves())
    return Inputs(
        call.inputs.args, call.inputs.kwargs, (), tuple(f"input_{i}" for i in range(count))
    )


class KeywordCall(torch.nn.Module):
    """A module called as the model called it (positional and keyword inputs), its tensors
    given positionally: how a submodule with keyword inputs goes through the TorchScript
    exporter, which binds keyword inputs to positions itself, and transformers' models
    refuse that ("got multiple values for argument 'use_cache'"); and how a module with
    dynamic axes goes through either exporter, one spec per tensor whatever the structure
    it was called with. The repro script writes the same wrapper."""

    def __init__(self, module: torch.nn.Module, inputs: Inputs) -> None:
        super().__init__()
        self.module = module
        self.recorded = inputs

    def forward(self, *tensors: torch.Tensor) -> Any:
        given = iter(tensors)
        return self.recorded.map_tensors(lambda _: next(given)).call(self.module)


def exported_as(
    module: torch.nn.Module, call: Call, exporter: str
) -> tuple[torch.nn.Module, Inputs, DynamicShapes | None]:
    """What the cell's exporter is given for `module` with its recorded call: the module and
    its inputs as they are; or, for TorchScript with keyword inputs and for any call with
    dynamic axes, a `KeywordCall` and the tensors, with their axes (`{axis: name}` per
    tensor: TorchScript's form, or torch.export's for the wrapper's `*tensors`)."""
    inputs = judged_inputs(call)
    if not through_call(call, exporter):
        return module, inputs, None
    tensors = Inputs(tuple(inputs.leaves()), {}, (), inputs.input_names)
    if not has_dynamic_axes(call):
        return KeywordCall(module, inputs), tensors, None
    named = tuple({a: f"input_{i}_{a}" for a in dims} for i, dims in enumerate(call.dynamic or ()))
    spec: DynamicShapes = named if exporter == KEYWORDS_BOUND_BY else {"tensors": named}
    return KeywordCall(module, inputs), tensors, spec


def has_dynamic_axes(call: Call) -> bool:
    return any(call.dynamic or ())


def through_call(call: Call, exporter: str) -> bool:
    """Whether the exporter is given a `KeywordCall` and the tensors for `call` (the
    search's export and the script's alike): TorchScript with keyword inputs, and any call
    with dynamic axes."""
    keywords = exporter == KEYWORDS_BOUND_BY and bool(call.inputs.kwargs)
    return keywords or has_dynamic_axes(call)


def failure_of(
    module: torch.nn.Module, call: Call, target: Target, workdir: Path
) -> tuple[Stage, str, str | None] | None:
    """Export `module` alone with the cell's exporter and take it through the cell's stages
    (`judged`)."""
    exported, given, dynamic = exported_as(module, call, target.exporter)
    return judged(module, judged_inputs(call), (exported, given, dynamic), target, workdir)


def judged(
    module: torch.nn.Module,
    inputs: Inputs,
    export: tuple[torch.nn.Module, Inputs, DynamicShapes | None],
    target: Target,
    workdir: Path,
) -> tuple[Stage, str, str | None] | None:
    """Export what `export` says (module, inputs, dynamic shapes) through the cell's stages:
    the stage, raw error signature and classified one (`harness.cell.failures`) where it
    failed; (numerics, "differs", None) where its ONNX outputs differ from `module`'s own
    eager outputs on `inputs` beyond the cell's tolerance; else None."""
    exported, given, dynamic_shapes = export
    try:
        got = through_stages(exported, given, target, workdir, dynamic_shapes)
    except StageFailure as failure:
        return failure.stage, signature_of(failure.error), failures.signature(failure.error)
    except Exception:  # a module that cannot even be exported this way is no repro
        return None
    if target.numerics and differs(module, inputs, [np.asarray(g) for g in got], target):
        return Stage.NUMERICS, DIFFERS, None
    return None


def same_signature(found: str | None, wanted: str | None) -> bool:
    """Two signatures of one failure: equal but for the numbering of size symbols (a
    module exported alone numbers its dynamic sizes afresh: s44 in the model, s0 alone)."""
    if found is None or wanted is None:
        return found == wanted
    return SIZE_SYMBOL.sub("s?", found) == SIZE_SYMBOL.sub("s?", wanted)


def differs(module: torch.nn.Module, inputs: Inputs, got: list[np.ndarray], target: Target) -> bool:
    """Some ONNX output outside the cell's rule against the module's own eager output."""
    want64: list[np.ndarray | None]
    with torch.no_grad():
        want = [t.numpy() for t in flatten_outputs(inputs.call(module))]
        try:
            module64 = copy.deepcopy(module).double()
            want64 = [t.numpy() for t in flatten_outputs(to_float64(inputs).call(module64))]
        except Exception:  # an op without a float64 kernel: plain allclose
            want64 = [None] * len(want)
    if len(got) != len(want):
        return True
    checks = [
        check_output(f"output_{i}", g, w, w64, *target.tolerance)
        for i, (g, w, w64) in enumerate(zip(got, want, want64, strict=True))
    ]
    return any(not c.ok for c in checks)


# -- the search ------------------------------------------------------------------------------

DIFFERS = "differs from its own eager output"


@dataclass
class Outcome:
    """The search's answer: the kept module (with its items replaced) and its recorded call,
    the target as this process raises it, the sizes before, or why nothing was kept."""

    target: Target
    params_before: int
    depth_before: int
    kept: Kept | None = None
    module: torch.nn.Module | None = None
    call: Call | None = None
    reason: str | None = None


def minimize_module(
    model: torch.nn.Module,
    inputs: Inputs,
    target: Target,
    workdir: Path,
    deadline: float,
    dynamic: tuple[Inputs, DynamicShapes] | None = None,
) -> Outcome:
    """The smallest submodule of `model` whose export alone fails the cell's way. `dynamic`:
    a dynamic cell's inputs at its second shape (each module's dynamic axes are derived
    from them) and its own dynamic shapes (the whole model is exported as the cell was)."""
    calls = record_calls(model, inputs, dynamic[0] if dynamic else None)
    outcome = Outcome(target, parameters(model), height(model))
    as_cell = (model, inputs, dynamic[1] if dynamic else None)
    whole = judged(model, inputs, as_cell, target, workdir)
    if whole is None or whole[0] is not target.stage or not _is_target(whole, target.signature):
        did = "passes" if whole is None else f"fails at {whole[0]} with {whole[1]}"
        outcome.reason = f"the whole model, exported again here, {did}: not the cell's failure"
        return outcome
    outcome.target = target = replace(target, signature=whole[1])

    seen: dict[str, str] = {}  # what each module tried did alone, for the reason

    def fails(path: str) -> bool:
        found = failure_of(model.get_submodule(path), calls[path], target, workdir)
        seen[path] = "passes" if found is None else f"fails at {found[0]}: {found[1][:80]}"
        return (
            found is not None
            and found[0] is target.stage
            and same_signature(found[1], target.signature)
        )

    searched = {path: call for path, call in calls.items() if call.standalone or not path}
    sizes = {path: parameters(model.get_submodule(path)) for path in searched}
    out_of_time: Callable[[], bool] = lambda: time.monotonic() > deadline  # noqa: E731
    kept = descend(searched, sizes, fails, out_of_time)
    if kept.path == "":
        alone = "; ".join(f"{p} {what}" for p, what in list(seen.items())[:3])
        where = "the failure is in the model's own forward" if kept.complete else "out of time"
        outcome.reason = (
            f"no submodule fails this way on its own ({kept.tests} tried: {alone}):"
            f" {where} ({type(model).__qualname__}.forward)"
        )
        return outcome
    outcome.kept = thin(model, kept, calls, fails, out_of_time)
    outcome.module, outcome.call = model.get_submodule(kept.path), calls[kept.path]
    return outcome


def _is_target(found: tuple[Stage, str, str | None], signature: str | None) -> bool:
    """Whether a failure's raw or classified signature is the cell's (any, where None)."""
    return signature is None or any(same_signature(s, signature) for s in found[1:])


@dataclass
class Kept:
    """The smallest failing submodule found: its path ("" for the model), the items
    replaced by identity inside it, candidates judged, and whether it ran to its end."""

    path: str
    replaced: list[str] = field(default_factory=list)
    tests: int = 0
    complete: bool = True


def descend(
    calls: dict[str, Call],
    sizes: dict[str, int],
    fails: Callable[[str], bool],
    out_of_time: Callable[[], bool],
) -> Kept:
    """Down the tree from the model (known to fail): the smallest child that fails, again."""
    kept = Kept("")
    while True:
        children = sorted(nearest_called(kept.path, calls), key=lambda p: (sizes[p], p.count(".")))
        for child in children:
            if out_of_time():
                kept.complete = False
                return kept
            kept.tests += 1
            if fails(child):
                kept.path = child
                break
        else:
            return kept


def thin(
    model: torch.nn.Module,
    kept: Kept,
    calls: dict[str, Call],
    fails: Callable[[str], bool],
    out_of_time: Callable[[], bool],
) -> Kept:
    """Replace the kept module's repeated items by identity, last first, while it fails."""
    root = model.get_submodule(kept.path)
    prefix = f"{kept.path}." if kept.path else ""
    for name, container in list(root.named_modules()):
        if not isinstance(container, torch.nn.ModuleList | torch.nn.Sequential):
            continue
        if any(f"{prefix}{name}".startswith(f"{gone}.") for gone in kept.replaced):
            continue  # inside an item already replaced: no longer part of the module
        for index in reversed(range(len(container))):
            path = f"{prefix}{name}.{index}" if name else f"{prefix}{index}"
            stand_in = _stand_in(calls.get(path))
            if stand_in is None:
                continue
            if out_of_time():
                kept.complete = False
                return kept
            item = container[index]
            container[index] = stand_in
            kept.tests += 1
            if fails(kept.path):
                kept.replaced.append(path)
            else:
                container[index] = item
    return kept


class PassThrough(torch.nn.Module):
    """Stands in for a repeated item called with more than one tensor: gives back its first
    input (as a 1-tuple where the item returned a tuple). The script defines it again."""

    def __init__(self, tuple_out: bool) -> None:
        super().__init__()
        self.tuple_out = tuple_out

    def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        return (x,) if self.tuple_out else x


def _stand_in(call: Call | None) -> torch.nn.Module | None:
    """What can replace an item whose output has its first input's shape and dtype:
    `Identity` for one tensor in, else a `PassThrough`; None where the shape changes."""
    if call is None or call.output is None or not call.inputs.args:
        return None
    given = call.inputs.args[0]
    if not isinstance(given, torch.Tensor) or call.output != (tuple(given.shape), given.dtype):
        return None
    if len(call.inputs.args) == 1 and not call.inputs.kwargs and not call.tuple_out:
        return torch.nn.Identity()
    return PassThrough(call.tuple_out)
