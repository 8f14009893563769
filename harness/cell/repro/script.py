"""`repro_min.py`: a minimal repro as a standalone script (torch, onnx, onnxruntime, numpy;
no harness import) and its inputs saved beside it (`repro_min_inputs.pt`).

The script rebuilds the kept subgraph as a module (its code is the program's own, as
torch.fx writes it), exports it with the cell's exporter at the cell's opset, and takes it
through the cell's stages up to the failing one. It exits 1 when the failure reproduces
(the exporter's or the runtime's own error, same stage and error signature as the cell;
or an AssertionError naming the node whose value is wrong), 0 when it does not, and 2 when
it fails some other way. The versions it was made with are in its docstring.
"""

from __future__ import annotations

import importlib.machinery
import math
import platform
import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.cell.repro.oracle import Target
from harness.cell.repro.program import Candidate
from harness.store.error_text import normalization_rules
from harness.store.status import Stage

SCRIPT = "repro_min.py"
INPUTS = "repro_min_inputs.pt"
# Namespaces whose ops torch itself defines: no import needed to call them.
_TORCH_NAMESPACES = {"aten", "prims", "prim", "_c10d_functional", "_quantized", "quantized"}


class NotStandalone(Exception):
    """The kept code uses something a script cannot import; the message says what."""


@dataclass(frozen=True)
class About:
    """What the docstring says: the cell, the run, and how the repro was made."""

    cell: str
    run_id: str
    nodes_kept: int
    nodes_before: int
    program: str  # which program the nodes come from


def write(folder: Path, candidate: Candidate, target: Target, about: About) -> list[str]:
    """Write the script and its inputs into `folder`; returns the modules it imports to
    define custom ops (empty for a plain torch program)."""
    folder.mkdir(parents=True, exist_ok=True)
    saved = {
        "inputs": [t.detach().clone() for t in candidate.inputs],
        "parameters": {k: v.detach().clone() for k, v in candidate.parameters.items()},
        "buffers": {k: v.detach().clone() for k, v in candidate.buffers.items()},
    }
    torch.save(saved, folder / INPUTS)
    forward, imports = _forward_source(candidate.module)
    custom = _custom_op_imports(candidate.module)
    text = script_text(candidate, target, about, forward, [*imports, *custom.values()])
    (folder / SCRIPT).write_text(text)
    return list(custom)


def _forward_source(module: torch.fx.GraphModule) -> tuple[str, list[str]]:
    """The forward method as torch.fx writes it, and the lines that define the globals it
    uses (torch.fx resolves them in its own namespace)."""
    code = module.graph.python_code(root_module="self")
    body = code.src.strip("\n")
    lines = []
    for name, value in sorted(code.globals.items()):
        if name != "torch" and re.search(rf"\b{re.escape(name)}\b", body):
            lines.append(_global_line(name, value))
    return body, lines


def _global_line(name: str, value: Any) -> str:
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return f"{name} = float({str(value)!r})"
    if isinstance(value, types.ModuleType):
        return f"import {value.__name__} as {name}"
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
    if module and qualname and "." not in qualname and "<" not in qualname:
        return f"from {module} import {qualname} as {name}"
    raise NotStandalone(f"the program's code uses {name} = {value!r}, which cannot be imported")


def _custom_op_imports(module: torch.fx.GraphModule) -> dict[str, str]:
    """For each op outside torch's own namespaces: the module that defines it, as the
    line that loads it (by name where it imports so, else from its file)."""
    lines: dict[str, str] = {}
    for node in module.graph.nodes:
        namespace = getattr(node.target, "namespace", None)
        if node.op != "call_function" or namespace is None or namespace in _TORCH_NAMESPACES:
            continue
        defined_in = _defining_module(node.target)
        if defined_in is None:
            raise NotStandalone(f"custom op {node.target}: the module defining it is unknown")
        lines.setdefault(defined_in.__name__, _load_line(defined_in))
    return lines


def _defining_module(op: Any) -> types.ModuleType | None:
    from torch._library.custom_ops import OPDEFS

    definition = OPDEFS.get(op.name().split(".")[0]) if hasattr(op, "name") else None
    init = getattr(definition, "_init_fn", None)
    return sys.modules.get(getattr(init, "__module__", "")) if init is not None else None


def _load_line(module: types.ModuleType) -> str:
    """`import name` where that finds this very module, else loading it from its file."""
    name, path = module.__name__, getattr(module, "__file__", None)
    # Searched on sys.path afresh (find_spec would answer from sys.modules): a module
    # loaded from a file by its own name is not importable by that name.
    top = importlib.machinery.PathFinder.find_spec(name.split(".")[0])
    if (
        top is not None
        and path is not None
        and Path(path).resolve().is_relative_to(Path(top.origin or "").resolve().parent)
    ):
        return f"import {name}  # defines custom ops the program calls"
    if path is None:
        raise NotStandalone(f"module {name} defines a custom op but has no file to load")
    where = str(Path(path).resolve())
    return f"_load_module({name!r}, {where!r})  # defines custom ops the program calls"


def versions() -> str:
    import onnx
    import onnxruntime
    import onnxscript

    return (
        f"python {platform.python_version()}, torch {torch.__version__}, onnx {onnx.__version__},"
        f" onnxscript {onnxscript.__version__}, onnxruntime {onnxruntime.__version__}"
    )


# -- the text ----------------------------------------------------------------------------------


def script_text(
    candidate: Candidate, target: Target, about: About, forward: str, imports: list[str]
) -> str:
    loads = any(line.startswith("_load_module(") for line in imports)
    parts = [
        _docstring(target, about),
        _PRELUDE.format(copy="import copy\n" if target.numerics else ""),
        *([_LOAD_MODULE] if loads else []),
        "\n".join(imports),
        _constants(candidate, target),
        _MODULE + textwrap.indent(forward.strip(), "    "),
        _EXPORT,
        _NUMERICS_MAIN if target.numerics else _ERRORS_MAIN,
        _TAIL,
    ]
    text = "\n\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def _docstring(target: Target, about: About) -> str:
    expected = (
        f"the value of node {target.node} differs between ONNX Runtime and torch beyond"
        f" rtol {target.tolerance[0]:g} / atol {target.tolerance[1]:g} (the cell's rule)"
        if target.numerics
        else f"{_step(target.stage)} fails with {target.signature}"
    )
    what = (
        f"{about.nodes_kept} of the {about.nodes_before} nodes of {about.program}, exported"
        f" by themselves with torch.onnx.export(..., {_exporter_call(target)},"
        f" opset_version={target.opset}). The values they read from the rest of the model"
        f" are inputs, saved in {INPUTS} beside this file."
    )
    return "\n\n".join(
        [
            f'"""Minimal repro: {about.cell}, {target.stage} failure (run {about.run_id}).',
            textwrap.fill(what, 88),
            textwrap.fill(f"Expected: {expected}.", 88),
            f"Run: python {SCRIPT}\n"
            "Exits 1 when the failure reproduces, 0 when it does not, 2 when it fails some other way.",
            textwrap.fill(f"Made with {versions()}.", 88) + '\n"""',
        ]
    )


def _exporter_call(target: Target) -> str:
    return "dynamo=True" if target.exporter.startswith("dynamo") else "dynamo=False"


def _step(stage: Stage) -> str:
    return "export" if stage.is_export else str(stage)


def _constants(candidate: Candidate, target: Target) -> str:
    steps = ["export", "check", "ort_session", "ort_run"]
    last = "ort_run" if target.numerics else _step(target.stage)
    return "\n".join(
        [
            f"OPSET = {target.opset}",
            f"DYNAMO = {target.exporter.startswith('dynamo')}",
            f"INPUT_NAMES = {list(candidate.input_names)!r}",
            f"STEPS = {steps[: steps.index(last) + 1]!r}",
            f"EXPECTED_STEP = {last!r}",
            f"EXPECTED = {target.signature!r}",
            f"NODE = {target.node!r}",
            f"RTOL, ATOL = {target.tolerance[0]!r}, {target.tolerance[1]!r}",
            f"NORMALIZE = {normalization_rules()!r}",
        ]
    )


_PRELUDE = """
{copy}import re
import sys
import traceback
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

HERE = Path(__file__).resolve().parent
"""

_LOAD_MODULE = '''
def _load_module(name, path):
    """Import a module from its file: it defines custom ops the program calls."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
'''

_MODULE = """
SAVED = torch.load(HERE / "repro_min_inputs.pt", weights_only=True)


class Repro(torch.nn.Module):
    def __init__(self):
        super().__init__()
        for name, value in SAVED["parameters"].items():
            self.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))
        for name, value in SAVED["buffers"].items():
            self.register_buffer(name, value)

"""

_EXPORT = '''
def run_steps(model, inputs):
    """Export, then check, load and run the model as the harness's cell did, up to STEPS[-1].
    Returns the outputs (numpy) or raises; the step that raised is in STEP[0]."""
    path = HERE / "repro_min.onnx"
    STEP[0] = "export"
    torch.onnx.export(
        model, inputs, str(path), input_names=INPUT_NAMES, opset_version=OPSET, dynamo=DYNAMO
    )
    if "check" in STEPS:
        STEP[0] = "check"
        onnx.checker.check_model(str(path), full_check=True)
    if "ort_session" in STEPS:
        STEP[0] = "ort_session"
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    if "ort_run" in STEPS:
        STEP[0] = "ort_run"
        wanted = {i.name for i in session.get_inputs()}
        feeds = {n: t.numpy() for n, t in zip(INPUT_NAMES, inputs) if n in wanted}
        return session.run(None, feeds)
    return None


STEP = ["export"]


def signature(error):
    """The error's root cause, normalized as the harness groups failures."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = re.sub(r"\\x1b\\[[0-9;]*m", "", str(error)).strip() or repr(error)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = next((ln for ln in lines if not ln.startswith(("Traceback", "File ", "#"))), "")
    for pattern, replacement in NORMALIZE:
        first = re.sub(pattern, replacement, first)
    return f"{type(error).__name__}: {first.strip()[:160]}"
'''

_ERRORS_MAIN = """
def main():
    model, inputs = Repro().eval(), tuple(SAVED["inputs"])
    try:
        run_steps(model, inputs)
    except Exception as error:
        traceback.print_exc()
        found = signature(error)
        if (STEP[0], found) == (EXPECTED_STEP, EXPECTED):
            print(f"REPRODUCED at {STEP[0]}: {found}", file=sys.stderr)
            return 1
        print(f"FAILED DIFFERENTLY at {STEP[0]}: {found}", file=sys.stderr)
        print(f"  expected at {EXPECTED_STEP}: {EXPECTED}", file=sys.stderr)
        return 2
    print(f"not reproduced: {', '.join(STEPS)} passed")
    return 0
"""

_NUMERICS_MAIN = '''
def torch_outputs(model, inputs):
    """The node's value in torch (float32) and, where the ops run in it, float64."""
    with torch.no_grad():
        want = model(*inputs)[-1].numpy()
        try:
            model64 = copy.deepcopy(model).double()
            inputs64 = [t.double() if t.is_floating_point() else t for t in inputs]
            want64 = model64(*inputs64)[-1].numpy()
        except Exception:
            want64 = None
    return want, want64


def mismatched(got, want, want64):
    """Elements outside the harness's rule: |onnx - torch| <= atol + rtol * |torch|, or
    within 10x torch float32's own error against float64 plus atol; NaN and inf must sit
    where torch's are. Integers and booleans must be equal."""
    if not np.issubdtype(want.dtype, np.floating):
        return got != want
    got, want = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(got) & np.isfinite(want)
    misplaced = (np.isnan(got) != np.isnan(want)) | (np.isposinf(got) != np.isposinf(want))
    misplaced |= np.isneginf(got) != np.isneginf(want)
    with np.errstate(invalid="ignore"):
        diff = np.where(finite, np.abs(got - want), 0.0)
        close = diff <= ATOL + RTOL * np.abs(want)
        if want64 is not None and want64.shape == want.shape:
            truth = want64.astype(np.float64)
            close |= np.abs(got - truth) <= 10.0 * np.abs(want - truth) + ATOL
    return (finite & ~close) | misplaced


def main():
    model, inputs = Repro().eval(), tuple(SAVED["inputs"])
    want, want64 = torch_outputs(model, inputs)
    try:
        got = np.asarray(run_steps(model, inputs)[-1])
    except Exception as error:
        traceback.print_exc()
        print(f"FAILED DIFFERENTLY at {STEP[0]}: {signature(error)}", file=sys.stderr)
        return 2
    if got.shape != want.shape:
        print(f"REPRODUCED: node {NODE} has another shape", file=sys.stderr)
        raise AssertionError(f"node {NODE}: ONNX Runtime gives shape {got.shape}, torch {want.shape}")
    bad = mismatched(got, want, want64)
    if not bad.any():
        print(f"not reproduced: node {NODE} matches torch within rtol {RTOL} / atol {ATOL}")
        return 0
    print(f"REPRODUCED: node {NODE} differs", file=sys.stderr)
    worst = float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0, where=bad))
    raise AssertionError(
        f"node {NODE}: {int(bad.sum())} of {want.size} values differ between ONNX Runtime and"
        f" torch beyond rtol {RTOL} / atol {ATOL} (max_abs {worst:.4g})"
    )
'''

_TAIL = """
if __name__ == "__main__":
    sys.exit(main())
"""
