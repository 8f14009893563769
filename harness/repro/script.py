"""`repro_min.py`: a minimal repro as a standalone script (torch, onnx, onnxruntime, numpy;
no harness import) and its inputs saved beside it (`repro_min_inputs.pt`).

The script rebuilds the kept subgraph as a module (its code is the program's own, as
torch.fx writes it), exports it with the cell's exporter at the cell's opset, and takes it
through the cell's stages up to the failing one. It exits 1 when the failure reproduces
(the exporter's or the runtime's own error, same stage and error signature as the cell;
or an AssertionError naming the node whose value is wrong), 0 when it does not, and 2 when
it fails some other way. The versions it was made with are in its docstring.

It carries only what its failure needs: a mismatch script judges the node's value by the
cell's rule (`MISMATCH`: harness.cell.numerics's, in a few lines of torch), with the
float64 run for eager's noise floor only where the kept ops run in float64.
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

from harness.repro.oracle import Target, torch_values
from harness.repro.program import Candidate
from harness.store.error_text import SIZE_SYMBOL
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
    return "\n".join(
        [
            f"SPEC = importlib.util.spec_from_file_location({name!r}, {where!r})",
            "sys.modules[SPEC.name] = importlib.util.module_from_spec(SPEC)",
            "SPEC.loader.exec_module(sys.modules[SPEC.name])  # defines custom ops the program calls",
        ]
    )


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
# What a normalized signature masks, and torch.export's size symbols (s44), numbered per export.
_PLACEHOLDER = re.compile(rf"0x\?|<path>|\bN\b|{SIZE_SYMBOL.pattern}")


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
    """The steps after the export, inside the script's try (`path`, `leaves`, `INPUT_NAMES`)."""
    lines = {
        "check": ["onnx.checker.check_model(path, full_check=True)"],
        "ort_session": [f"session = ort.InferenceSession(path, providers={PROVIDERS})"],
        "ort_run": [f"got = session.run(None, {FEEDS})"],
    }
    found = []
    for step in steps[1:]:
        found += [f'    step = "{step}"', *(f"    {ln}" for ln in lines[step])]
    return found


PROVIDERS = '["CPUExecutionProvider"]'


# ONNX Runtime's feeds, by name: a graph may leave out an input it does not read.
FEEDS = "{i.name: leaves[INPUT_NAMES.index(i.name)].numpy() for i in session.get_inputs()}"


def except_lines() -> list[str]:
    """An error reproduces where its root cause is at EXPECTED's step, of its type, and
    says its text."""
    return [
        "except Exception as error:",
        "    traceback.print_exc()",
        "    while error.__cause__ is not None:",
        "        error = error.__cause__",
        '    found = (step, type(error).__name__, " ".join(str(error).split()))',
        "    if found[:2] == EXPECTED[:2] and EXPECTED[2] in found[2]:",
        '        print(f"REPRODUCED at {step}: {found[1]}: {EXPECTED[2]}", file=sys.stderr)',
        "        sys.exit(1)",
        '    print(f"FAILED DIFFERENTLY at {step}: {found[1]}; expected {EXPECTED}", file=sys.stderr)',
        "    sys.exit(2)",
    ]


# A mismatch script's failure is a value: an error before the comparison is not it.
OTHER_FAILURE = [
    "except Exception:",
    "    traceback.print_exc()",
    '    print("FAILED DIFFERENTLY: before the comparison", file=sys.stderr)',
    "    sys.exit(2)",
]

# The cell's rule (harness.cell.numerics), element by element; both kinds of script use it.
MISMATCH = """
# The cell's rule: an element passes within atol + rtol * |torch| (NaN and inf where
# torch's are), or where its error against float64 is within 10x torch float32's own,
# plus atol; integers and bools must be equal. Returns what differs, or None.
def mismatch(got, want, want64):
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)} where torch gives {tuple(want.shape)}"
    close = got == want
    if want.is_floating_point():
        close = torch.isclose(got.double(), want.double(), RTOL, ATOL, equal_nan=True)
        close |= want.isfinite() & ((got - want64).abs() <= 10 * (want - want64).abs() + ATOL)
    if not close.all():
        worst = float((got.double() - want.double()).abs()[~close].max())
        return f"max_abs {worst:.4g}: {int((~close).sum())} of {close.numel()} values beyond rtol {RTOL} / atol {ATOL}"
"""


def export_line(
    model: str, target: Target, *, kwargs: bool = False, names: bool = False, dynamic: bool = False
) -> str:
    """The export call, inside the script's try; `dynamic`: along the script's
    DYNAMIC_SHAPES (dynamo) or DYNAMIC (TorchScript's axes by input name)."""
    dynamo = target.exporter.startswith("dynamo")
    along = (" dynamic_shapes=DYNAMIC_SHAPES," if dynamo else " dynamic_axes=DYNAMIC,") * dynamic
    return (
        f"    torch.onnx.export({model}, {'args' if kwargs else 'leaves'}, path,"
        f"{' kwargs=kwargs,' * kwargs}{' input_names=INPUT_NAMES,' * names}{along}"
        f" opset_version={target.opset}, dynamo={dynamo})"
    )


def script_text(
    candidate: Candidate, target: Target, about: About, forward: str, imports: list[str]
) -> str:
    last = "ort_run" if target.numerics else step_of(target.stage)
    steps = steps_for(last)
    loads = any(line.startswith("SPEC = ") for line in imports)
    head = [
        *["import importlib.util"] * loads,
        "import sys",
        "import traceback",
        "from pathlib import Path",
    ]
    head += ["", *["import onnx"] * ("check" in steps)]
    head += [*["import onnxruntime as ort"] * ("ort_session" in steps), "import torch"]
    if target.numerics:
        body = _numerics_body(target, float64=_runs_in_float64(candidate))
    else:
        body = _body(target, steps)
    parts = [
        _docstring(target, about),
        "\n".join(head),
        "\n".join(imports),
        _constants(candidate, target),
        *([MISMATCH] if target.numerics else []),
        _module(candidate, forward),
        body,
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
    lines = [f'SAVED = torch.load(Path(__file__).with_name("{INPUTS}"), weights_only=True)']
    if target.stage in (Stage.ORT_RUN, Stage.NUMERICS):  # ONNX Runtime is fed by name
        lines.append(f"INPUT_NAMES = {list(candidate.input_names)!r}")
    if target.numerics:
        tolerance = f"{target.tolerance[0]!r}, {target.tolerance[1]!r}"
        lines.append(f"NODE, RTOL, ATOL = {target.node!r}, {tolerance}  # the cell's tolerance")
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


_ONNX_PATH = 'str(Path(__file__).with_name("repro_min.onnx"))'


def _body(target: Target, steps: tuple[str, ...]) -> str:
    """The script's body for an error at some step: it reproduces where it is EXPECTED's."""
    lines = [
        'model, leaves = Repro().eval(), tuple(SAVED["inputs"])',
        f'path, step = {_ONNX_PATH}, "export"',
        "try:",
        export_line("model", target, names="ort_run" in steps),
        *step_lines(steps),
        *except_lines(),
        f"print({'not reproduced: ' + ', '.join(steps) + ' passed'!r})",
    ]
    return "\n".join(lines)


def _numerics_body(target: Target, *, float64: bool) -> str:
    """The script's body for a mismatch: the last node's value from ONNX Runtime against
    torch's, by the cell's rule (with the float64 run for eager's noise floor only where
    the ops run in float64: written in where they ran so here, in the harness)."""
    leaves = "[t.double() if t.is_floating_point() else t for t in leaves]"
    noise = (
        f"    want64 = Repro().double()(*{leaves})[-1]  # for eager's noise floor"
        if float64
        else "    want64 = want  # no float64 kernel for these ops: no noise floor"
    )
    lines = [
        'model, leaves = Repro().eval(), tuple(SAVED["inputs"])',
        f"path = {_ONNX_PATH}",
        "try:",
        export_line("model", target, names=True),
        f"    session = ort.InferenceSession(path, providers={PROVIDERS})",
        f"    got = session.run(None, {FEEDS})",
        "    want = model(*leaves)[-1]",
        noise,
        *OTHER_FAILURE,
        "if found := mismatch(torch.from_numpy(got[-1]), want, want64):",
        '    print(f"REPRODUCED: node {NODE} differs", file=sys.stderr)',
        '    raise AssertionError(f"node {NODE}: {found}")',
        'print(f"not reproduced: node {NODE} matches torch within rtol {RTOL} / atol {ATOL}")',
    ]
    return "\n".join(lines)


def _runs_in_float64(candidate: Candidate) -> bool:
    return torch_values(candidate)[1] is not None
