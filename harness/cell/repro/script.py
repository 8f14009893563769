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

EXITS = "Exits 1 when the failure reproduces, 0 when it does not, 2 when it fails some other way."
_PLACEHOLDER = re.compile(r"0x\?|<path>|\bN\b")


def step_of(stage: Stage) -> str:
    return "export" if stage.is_export else str(stage)


def steps_for(last: str) -> tuple[str, ...]:
    """The steps a failure at `last` needs: the export, then only what leads to `last`
    (the checker only for a checker failure; ONNX Runtime's session for its run)."""
    return {
        "export": ("export",),
        "check": ("export", "check"),
        "ort_session": ("export", "ort_session"),
        "ort_run": ("export", "ort_session", "ort_run"),
    }[last]


def expected_text(signature: str) -> tuple[str, str]:
    """The error's type and the longest literal piece of its normalized first line: what
    a script finds in the raw message without the harness's normalization."""
    kind, _, message = signature.partition(": ")
    pieces = [p.strip() for p in _PLACEHOLDER.split(message)]
    return kind, max(pieces, key=len, default="")


def step_lines(steps: tuple[str, ...]) -> list[str]:
    """The steps after the export, inside the script's try (`path`, `names`, `leaves`)."""
    lines = {
        "check": ["onnx.checker.check_model(path, full_check=True)"],
        "ort_session": ['session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])'],
        "ort_run": [
            "wanted = {i.name for i in session.get_inputs()}",
            "got = session.run(None, {n: t.numpy() for n, t in zip(names, leaves) if n in wanted})",
        ],
    }
    found = []
    for step in steps[1:]:
        found += [f'        step = "{step}"', *(f"        {ln}" for ln in lines[step])]
    return found


def except_lines() -> list[str]:
    """An error reproduces where its root cause is at EXPECTED's step, of its type, and
    says its text."""
    return [
        "    except Exception as error:",
        "        traceback.print_exc()",
        "        while error.__cause__ is not None:",
        "            error = error.__cause__",
        '        found = (step, type(error).__name__, " ".join(str(error).split()))',
        "        if found[:2] == EXPECTED[:2] and EXPECTED[2] in found[2]:",
        '            print(f"REPRODUCED at {step}: {found[1]}: {EXPECTED[2]}", file=sys.stderr)',
        "            return 1",
        '        print(f"FAILED DIFFERENTLY at {step}: {found[1]}; expected {EXPECTED}", file=sys.stderr)',
        "        return 2",
    ]


def other_failure_lines() -> list[str]:
    return [
        "    except Exception as error:",
        "        traceback.print_exc()",
        '        print(f"FAILED DIFFERENTLY at {step}: {type(error).__name__}", file=sys.stderr)',
        "        return 2",
    ]


def script_text(
    candidate: Candidate, target: Target, about: About, forward: str, imports: list[str]
) -> str:
    last = "ort_run" if target.numerics else step_of(target.stage)
    steps = steps_for(last)
    head = [*["import copy"] * target.numerics, "import sys", "import traceback"]
    head += ["from pathlib import Path", "", *["import onnx"] * ("check" in steps)]
    head += [*["import onnxruntime as ort"] * ("ort_session" in steps), "import torch"]
    loads = any(line.startswith("_load_module(") for line in imports)
    parts = [
        _docstring(target, about),
        "\n".join(head),
        *([_LOAD_MODULE] if loads else []),
        "\n".join(imports),
        _constants(candidate, target),
        _module(candidate, forward),
        _main(target, steps),
        'if __name__ == "__main__":\n    sys.exit(main())',
    ]
    text = "\n\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def _docstring(target: Target, about: About) -> str:
    expected = (
        f"the value of node {target.node} differs between ONNX Runtime and torch beyond"
        f" rtol {target.tolerance[0]:g} / atol {target.tolerance[1]:g} (the cell's rule)"
        if target.numerics
        else f"{step_of(target.stage)} fails with {target.signature}"
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
            f"Run: python {SCRIPT}\n{EXITS}",
            textwrap.fill(f"Made with {versions()}.", 88) + '\n"""',
        ]
    )


def _exporter_call(target: Target) -> str:
    return "dynamo=True" if target.exporter.startswith("dynamo") else "dynamo=False"


def _constants(candidate: Candidate, target: Target) -> str:
    lines = [
        "HERE = Path(__file__).resolve().parent",
        f'SAVED = torch.load(HERE / "{INPUTS}", weights_only=True)',
    ]
    if target.stage in (Stage.ORT_RUN, Stage.NUMERICS):  # ONNX Runtime is fed by name
        lines.append(f"INPUT_NAMES = {list(candidate.input_names)!r}")
    if target.numerics:
        lines += [
            f"NODE = {target.node!r}",
            f"RTOL, ATOL = {target.tolerance[0]!r}, {target.tolerance[1]!r}",
        ]
    else:
        lines.append(
            f"EXPECTED = {(step_of(target.stage), *expected_text(target.signature or ''))!r}"
        )
    return "\n".join(lines)


def _module(candidate: Candidate, forward: str) -> str:
    init = []
    if candidate.parameters:
        init += [
            '        for name, value in SAVED["parameters"].items():',
            "            self.register_parameter(name, torch.nn.Parameter(value, requires_grad=False))",
        ]
    if candidate.buffers:
        init += [
            '        for name, value in SAVED["buffers"].items():',
            "            self.register_buffer(name, value)",
        ]
    if init:
        init = ["    def __init__(self):", "        super().__init__()", *init, ""]
    body = "\n".join(["class Repro(torch.nn.Module):", *init])
    return body + "\n" + textwrap.indent(forward.strip(), "    ")


def _main(target: Target, steps: tuple[str, ...]) -> str:
    lines = [
        "def main():",
        '    model, leaves = Repro().eval(), tuple(SAVED["inputs"])',
        *(["    names = INPUT_NAMES"] if "ort_run" in steps else []),
        '    path, step = str(HERE / "repro_min.onnx"), "export"',
        "    try:",
        "        torch.onnx.export(",
        f"            model, leaves, path,{' input_names=names,' * ('ort_run' in steps)}",
        f"            opset_version={target.opset}, dynamo={target.exporter.startswith('dynamo')},",
        "        )",
        *step_lines(steps),
        *(other_failure_lines() if target.numerics else except_lines()),
    ]
    if target.numerics:
        lines += _NUMERICS.strip("\n").splitlines()
    done = 'f"not reproduced: node {NODE} matches torch within rtol {RTOL} / atol {ATOL}"'
    done = done if target.numerics else repr(f"not reproduced: {', '.join(steps)} passed")
    lines += [f"    print({done})", "    return 0"]
    return "\n".join(lines)


# The cell's rule: within atol + rtol * |torch|, NaN and inf where torch's are, or within
# 10x torch float32's own error against float64 plus atol (harness.cell.numerics).
_NUMERICS = """
    with torch.no_grad():
        want = model(*leaves)[-1].double()
    got = torch.from_numpy(got[-1]).double()
    if got.shape != want.shape:
        print(f"REPRODUCED: node {NODE} has another shape", file=sys.stderr)
        raise AssertionError(f"node {NODE}: ONNX Runtime gives shape {tuple(got.shape)}, torch {tuple(want.shape)}")
    close = torch.isclose(got, want, RTOL, ATOL, equal_nan=True)
    try:  # torch float32's own error against float64 (where the ops run in float64)
        with torch.no_grad():
            want64 = copy.deepcopy(model).double()(*[t.double() if t.is_floating_point() else t for t in leaves])[-1]
        close |= (got - want64).abs() <= 10 * (want - want64).abs() + ATOL
    except RuntimeError:
        pass
    if not close.all():
        print(f"REPRODUCED: node {NODE} differs", file=sys.stderr)
        worst = float((got - want).abs()[~close].max())
        raise AssertionError(
            f"node {NODE}: {int((~close).sum())} of {close.numel()} values differ between ONNX Runtime"
            f" and torch beyond rtol {RTOL} / atol {ATOL} (max_abs {worst:.4g})"
        )
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
