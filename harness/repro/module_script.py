"""`repro_min.py` for a module-level repro: the kept submodule as the model built it (its
class from the model's own package, or its source where a zoo file defines it, written
into the script), its weights and the inputs it got in the model's forward saved beside
the script, exported alone with the cell's exporter; only the steps the failure needs. A
mismatch is judged by the cell's rule (`script.MISMATCH`, the float64 run for eager's noise
floor where the module runs in float64), as the module search judged it.

The module is saved whole (`repro_min_module.pt`: its class, its attributes such as a
transformers config, its weights); a class defined in a zoo file, which no script can
import, is written into the script and the saved module is pointed at it.
"""

from __future__ import annotations

import ast
import copy
import importlib.machinery
import inspect
import pickle
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from harness.cell.shapes import pytree_node
from harness.repro import script
from harness.repro.modules import Call, PassThrough, through_call
from harness.repro.oracle import Target

MODULE = "repro_min_module.pt"


@dataclass(frozen=True)
class Kept:
    """What the docstring says about the module kept."""

    cell: str
    run_id: str
    path: str
    params_before: int
    params_after: int
    replaced: int


def write(folder: Path, module: torch.nn.Module, call: Call, target: Target, about: Kept) -> None:
    """Write the script, the module and its inputs into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    saved, passing = _without_pass_through(module)
    saved = _without_local_hooks(saved)
    torch.save(saved, folder / MODULE)
    torch.save((call.inputs.args, call.inputs.kwargs), folder / script.INPUTS)
    sources = zoo_sources(saved)
    dynamic = {f"input_{i}": list(axes) for i, axes in enumerate(call.dynamic or ()) if axes}
    script_text = text(
        saved,
        target,
        about,
        sources,
        passing,
        keywords=through_call(call, target.exporter),
        dynamic=dynamic,
        caches=_transformers_caches(call),
    )
    (folder / script.SCRIPT).write_text(script_text)


def _without_pass_through(
    module: torch.nn.Module,
) -> tuple[torch.nn.Module, list[tuple[str, bool]]]:
    """The module to save, with an Identity where a PassThrough stands (no script can
    import the harness's class: the script puts its own back), and where they stand."""
    passing = [(n, m.tuple_out) for n, m in module.named_modules() if isinstance(m, PassThrough)]
    if not passing:
        return module, []
    saved = copy.deepcopy(module)
    for name, _ in passing:
        parent, _, index = name.rpartition(".")
        container: Any = saved.get_submodule(parent)  # a ModuleList or Sequential
        container[int(index)] = torch.nn.Identity()
    return saved, passing


HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


# transformers marks a model whose output-capturing hooks are installed, and installs them
# at its first forward where the mark is not set.
HOOKED = "_output_capturing_hooks_installed"


def _without_local_hooks(module: torch.nn.Module) -> torch.nn.Module:
    """The module without the hooks pickle cannot save (transformers installs closures on
    its layers to capture their outputs, which a backbone reads its hidden states from):
    saved unmarked, so the script's first forward installs them again."""
    local = [
        (name, kind, key)
        for name, sub in module.named_modules()
        for kind in HOOKS
        for key, hook in getattr(sub, kind).items()
        if not _picklable(hook)
    ]
    if not local:
        return module
    saved = copy.deepcopy(module)
    for name, kind, key in local:
        getattr(saved.get_submodule(name), kind).pop(key)
    for sub in saved.modules():
        if getattr(sub, HOOKED, False):
            setattr(sub, HOOKED, False)
    return saved


def _picklable(value: object) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # a local function or lambda: AttributeError, PicklingError
        return False
    return True


@dataclass(frozen=True)
class Sources:
    """A zoo file's classes the module needs, as code: its name, imports and definitions."""

    module: str
    imports: list[str]
    definitions: list[str]


def zoo_sources(module: torch.nn.Module) -> Sources | None:
    """The definitions (and the imports they use) from the one file no script can import
    that defines classes of `module`'s tree; None where every class imports by name."""
    files = {type(m).__module__ for m in module.modules()} - {"builtins"}
    local = [name for name in sorted(files) if not _importable(name)]
    if not local:
        return None
    if len(local) > 1:
        raise script.NotStandalone(f"classes from several files no script imports: {local}")
    found = sys.modules[local[0]]
    tree = ast.parse(inspect.getsource(found))
    defined = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    wanted = {type(m).__name__ for m in module.modules() if type(m).__module__ == local[0]}
    if not wanted <= defined.keys():
        missing = ", ".join(sorted(wanted - defined.keys()))
        raise script.NotStandalone(f"{missing} not defined at the top of {local[0]}")
    while True:
        used = {name for n in wanted for name in _names(defined[n])} & defined.keys()
        if used <= wanted:
            break
        wanted |= used
    source = inspect.getsource(found).splitlines()
    definitions = [
        "\n".join(
            source[defined[n].lineno - 1 - len(defined[n].decorator_list) : defined[n].end_lineno]
        )
        for n in sorted(wanted, key=lambda n: defined[n].lineno)
    ]
    names = {name for n in wanted for name in _names(defined[n])}
    imports = [
        ast.get_source_segment(inspect.getsource(found), n) or ""
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom) and _imported(n) & names
    ]
    return Sources(local[0], [i for i in imports if "harness" not in i], definitions)


def _importable(name: str) -> bool:
    """Whether `import name` in a fresh process finds this very module."""
    loaded = sys.modules.get(name)
    path = getattr(loaded, "__file__", None)
    top = importlib.machinery.PathFinder.find_spec(name.split(".")[0])
    if top is None or path is None or top.origin is None:
        return name in sys.builtin_module_names or (top is not None and path is None)
    return Path(path).resolve().is_relative_to(Path(top.origin).resolve().parent)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _imported(node: ast.Import | ast.ImportFrom) -> set[str]:
    return {(a.asname or a.name).split(".")[0] for a in node.names}


# -- the text ----------------------------------------------------------------------------------


def text(
    module: torch.nn.Module,
    target: Target,
    about: Kept,
    sources: Sources | None,
    passing: list[tuple[str, bool]],
    *,
    keywords: bool = False,
    dynamic: dict[str, list[int]] | None = None,
    caches: bool = False,
) -> str:
    """The script; `keywords`: exported through `Call`, which takes the tensors (TorchScript
    with keyword inputs; any module exported with `dynamic` axes, by input name); `caches`:
    the inputs hold transformers' caches, which the script registers as pytree nodes."""
    last = "ort_run" if target.numerics else script.step_of(target.stage)
    steps = script.steps_for(last)
    imports = [*["import copy"] * target.numerics, "import sys", "import traceback"]
    imports += ["from pathlib import Path", "", *["import onnx"] * ("check" in steps)]
    imports += [*["import onnxruntime as ort"] * ("ort_session" in steps), "import torch"]
    imports += [_CACHES_IMPORT] * caches
    parts = [
        _docstring(module, target, about, sources),
        "\n".join(imports + [i for i in (sources.imports if sources else []) if i not in imports]),
        *(sources.definitions if sources else []),
        *([_PASS_THROUGH] if passing else []),
        *([_KEYWORD_CALL] if keywords else []),
        _constants(target, dynamic) + (f"\nPASS_THROUGH = {passing!r}" if passing else ""),
        *([script.MISMATCH] if target.numerics else []),
        _main(
            target,
            steps,
            sources,
            passing=bool(passing),
            keywords=keywords,
            dynamic=bool(dynamic),
            caches=caches,
        ),
    ]
    return "\n\n\n".join(p.strip("\n") for p in parts if p.strip()) + "\n"


def _docstring(
    module: torch.nn.Module, target: Target, about: Kept, sources: Sources | None
) -> str:
    cls = type(module)
    where = "written below from the model's file" if sources else f"from {cls.__module__}"
    thinned = f"; {about.replaced} repeated items replaced by identity" if about.replaced else ""
    what = (
        f"Module {about.path or '(the model)'} ({cls.__name__}, {where}; {about.params_after:,} of"
        f" the model's {about.params_before:,} parameters{thinned}), exported by itself with"
        f" torch.onnx.export(..., dynamo={target.exporter.startswith('dynamo')},"
        f" opset_version={target.opset}) with the inputs it got in the model's forward. The"
        f" module as the model built it (class, attributes, weights) is in {MODULE}, its"
        f" inputs in {script.INPUTS}, beside this file."
    )
    expected = (
        f"ONNX Runtime's outputs differ from the module's eager outputs beyond rtol"
        f" {target.tolerance[0]:g} / atol {target.tolerance[1]:g} (the cell's rule)"
        if target.numerics
        else f"{script.step_of(target.stage)} fails with {target.signature}"
    )
    return "\n\n".join(
        [
            f'"""Minimal repro: {about.cell}, {target.stage} failure (run {about.run_id}).',
            textwrap.fill(what, 88),
            textwrap.fill(f"Expected: {expected}.", 88),
            f"Run: python {script.SCRIPT}\n{script.EXITS}",
            textwrap.fill(f"Made with {script.versions()}.", 88) + '\n"""',
        ]
    )


def _constants(target: Target, dynamic: dict[str, list[int]] | None) -> str:
    lines = ["HERE = Path(__file__).resolve().parent"]
    if dynamic:
        lines.append(f"DYNAMIC = {dynamic!r}  # the axes that change with the cell's shape")
    if target.numerics:
        lines.append(f"RTOL, ATOL = {target.tolerance[0]!r}, {target.tolerance[1]!r}")
    else:
        step = script.step_of(target.stage)
        lines.append(f"EXPECTED = {(step, *script.expected_text(target.signature or ''))!r}")
    return "\n".join(lines)


_PASS_THROUGH = """
class PassThrough(torch.nn.Module):
    \"\"\"Stands in for a repeated item the failure does not need: its first input.\"\"\"

    def __init__(self, tuple_out):
        super().__init__()
        self.tuple_out = tuple_out

    def forward(self, x, *args, **kwargs):
        return (x,) if self.tuple_out else x
"""

_KEYWORD_CALL = """
class Call(torch.nn.Module):
    \"\"\"The module called as the model calls it (keyword inputs by keyword, caches as
    caches), its tensors given positionally: one input, and one dynamic axis spec, each.\"\"\"

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, *tensors):
        given = iter(tensors)
        a, k = torch.utils._pytree.tree_map_only(torch.Tensor, lambda _: next(given), (args, kwargs))
        return self.module(*a, **k)
"""

_PUT_BACK = [
    "for where, tuple_out in PASS_THROUGH:",
    '    parent, _, index = where.rpartition(".")',
    "    module.get_submodule(parent)[int(index)] = PassThrough(tuple_out)",
]

_TENSORS = "[t for t in torch.utils._pytree.tree_leaves({}) if torch.is_tensor(t)]"
_FEEDS = [
    f"leaves = tuple({_TENSORS.format('(args, kwargs)')})",
    'INPUT_NAMES = [f"input_{i}" for i in range(len(leaves))]',
]


def _main(
    target: Target,
    steps: tuple[str, ...],
    sources: Sources | None,
    *,
    passing: bool,
    keywords: bool,
    dynamic: bool = False,
    caches: bool = False,
) -> str:
    alias = (
        [f"sys.modules[{sources.module!r}] = sys.modules[__name__]  # the classes above"]
        if sources
        else []
    )
    feeds = "ort_run" in steps  # graph inputs named, to feed ONNX Runtime by name
    body = [
        *alias,
        f'module = torch.load(HERE / "{MODULE}", weights_only=False).eval()',
        *(_PUT_BACK if passing else []),
        *([_REGISTER_CACHES] if caches else []),
        f'args, kwargs = torch.load(HERE / "{script.INPUTS}", weights_only=False)',
        *(_FEEDS if feeds or keywords or dynamic else []),
        *(_dynamic_lines(target) if dynamic else []),
        'path = str(HERE / "repro_min.onnx")' if target.numerics else _PATH_AND_STEP,
        "try:",
        script.export_line("Call(module)", target, names=feeds or dynamic, dynamic=dynamic)
        if keywords  # the exporter takes the tensors, the wrapper calls the module as it was
        else script.export_line("module", target, kwargs=True, names=feeds),
    ]
    if target.numerics:
        return "\n".join(body + _NUMERICS)
    body += [*script.step_lines(steps), *script.except_lines()]
    return "\n".join([*body, 'print(f"not reproduced: {step} passed")'])


_PATH_AND_STEP = 'path, step = str(HERE / "repro_min.onnx"), "export"'


def _dynamic_lines(target: Target) -> list[str]:
    """DYNAMIC as torch.export takes it for `Call`'s `*tensors` (TorchScript takes it as is)."""
    if not target.exporter.startswith("dynamo"):
        return []
    return [
        'DYNAMIC_SHAPES = {"tensors": tuple(',
        "    dict.fromkeys(DYNAMIC.get(name, ()), torch.export.Dim.DYNAMIC) for name in INPUT_NAMES",
        ")}",
    ]


_CACHES_IMPORT = (
    "from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model"
)
_REGISTER_CACHES = "register_cache_pytrees_for_model(module)  # its caches flatten into tensors"


def _transformers_caches(call: Call) -> bool:
    """Whether the inputs hold an object of transformers' that the harness's process had
    registered as a pytree node (a cache): the script registers it as transformers does."""
    nodes = pytree.tree_leaves(
        (call.inputs.args, call.inputs.kwargs), is_leaf=lambda x: pytree_node(x) is not None
    )
    return any(
        pytree_node(x) is not None and type(x).__module__.startswith("transformers.") for x in nodes
    )


# ONNX Runtime's outputs against the module's own eager outputs, by the cell's rule (with
# the float64 run for eager's noise floor where the module runs in float64).
_NUMERICS = [
    f"    session = ort.InferenceSession(path, providers={script.PROVIDERS})",
    f"    got = session.run(None, {script.FEEDS})",
    "    with torch.no_grad():",
    f"        want = {_TENSORS.format('module(*args, **kwargs)')}",
    *script.OTHER_FAILURE,
    "try:  # torch float32's own error against float64, for eager's noise floor",
    "    args64, kwargs64 = torch.utils._pytree.tree_map_only(",
    "        torch.Tensor, lambda t: t.double() if t.is_floating_point() else t, (args, kwargs)",
    "    )",
    "    with torch.no_grad():",
    f"        want64 = {_TENSORS.format('copy.deepcopy(module).double()(*args64, **kwargs64)')}",
    "except Exception:  # an op without a float64 kernel: no noise floor",
    "    want64 = want",
    "if len(got) != len(want):",
    '    print("REPRODUCED: ONNX Runtime and eager differ", file=sys.stderr)',
    '    raise AssertionError(f"ONNX Runtime gives {len(got)} outputs, eager {len(want)}")',
    "for i, (g, w, w64) in enumerate(zip(got, want, want64)):",
    "    if found := mismatch(torch.from_numpy(g), w, w64):",
    '        print("REPRODUCED: ONNX Runtime and eager differ", file=sys.stderr)',
    '        raise AssertionError(f"output {i}: {found}")',
    'print(f"not reproduced: outputs match eager within rtol {RTOL} / atol {ATOL}")',
]
