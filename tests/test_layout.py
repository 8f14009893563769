"""The code's layout holds: the stage folders, module and function sizes, and the import
rules that keep stages from leaking (checked on what a module imports transitively, which
ruff's banned-api cannot see)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60
# argparse declarations read best as one list of flags, however long.
LONG_FUNCTIONS_ALLOWED = {"add_arguments"}
STAGES = (
    "store",
    "history",
    "zoo",
    "cell",
    "exporters",
    "runtime",
    "plan",
    "dispatch",
    "coverage",
    "compare",
    "report",
    "publish",
    "pipeline",
    "bisect",
    "repro",
    "debt",
    "commands",
)


def _modules() -> list[Path]:
    return sorted(HARNESS.rglob("*.py"))


def test_the_pipeline_stages_are_folders() -> None:
    folders = {p.name for p in HARNESS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(STAGES)


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_no_module_is_over_the_limit(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(HARNESS)} has {lines} lines"


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES and node.name not in LONG_FUNCTIONS_ALLOWED:
                found.append(f"{node.name} ({length} lines)")
    return found


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_no_function_is_over_the_limit(path: Path) -> None:
    assert not _long_functions(path), f"{path.relative_to(HARNESS)}: {_long_functions(path)}"


HEAVY = ("torch", "onnx", "onnxruntime", "ray", "matplotlib")


def _imported_after(modules: list[str]) -> set[str]:
    """The heavy packages a fresh interpreter holds after importing `modules`."""
    script = (
        "import json, sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    return set(json.loads(out.stdout))


def _package_modules(folder: str, *, skip: tuple[str, ...] = ()) -> list[str]:
    root = HARNESS.parent
    return [
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for p in sorted((HARNESS / folder).rglob("*.py"))
        if p.stem not in skip
    ]


@pytest.mark.parametrize("folder", ["plan", "store", "compare", "report", "publish", "bisect"])
def test_records_stages_import_no_torch_onnx_ort_or_ray(folder: str) -> None:
    """plan, store, compare, report and publish work on records and files: they load in a process
    without torch, onnx, onnxruntime or ray (matplotlib only when a plot is drawn); so does
    bisect, which reaches Ray through dispatch only once a bisection runs."""
    assert _imported_after(_package_modules(folder)) == set()


def test_what_dispatch_decides_is_pure() -> None:
    """harness/dispatch/policy.py holds dispatch's decisions (slots, clocks, node loss,
    retries, unrunnable cells) and cluster.py its plain data, without Ray or torch, so they
    are tested with hand-made states; the package itself imports nothing on its own."""
    modules = [
        "harness.dispatch",
        "harness.dispatch.policy",
        "harness.dispatch.flight",
        "harness.dispatch.loop",
        "harness.dispatch.cluster",
    ]
    assert _imported_after(modules) == set()


def test_the_zoo_contract_discovery_and_expectations_load_without_torch() -> None:
    """Plugins import harness.zoo; planning discovers the zoo and reads its expected
    failures; only the generators (and a cell's build) import torch."""
    modules = [
        "harness.zoo",
        "harness.zoo.discovery",
        "harness.zoo.expected",
        "harness.zoo.generated.catalog",
        "harness.zoo.generated.opinfo_specs",
        "harness.zoo.generated.transformers",
        "harness.commands.zoo",
    ]
    assert _imported_after(modules) == set()


def test_the_cli_and_the_exporter_registry_answer_without_torch() -> None:
    """`harness --help`, usage errors and suite validation stay instant."""
    assert _imported_after(["harness.cli", "harness.exporters", "harness.zoo"]) == set()


def _imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


# The layers, lowest first: a module may import its own layer and the layers below it. A
# module's layer is the longest of these its name starts with (zoo.generated, the
# generators, capture models with the exporters: they sit above cell and coverage).
LAYERS = (
    "harness.errors",
    "harness.stats",
    "harness.ddmin",
    "harness",  # __version__
    "harness.store",
    "harness.history",
    "harness.zoo",
    "harness.cell",
    "harness.exporters",
    "harness.runtime",
    "harness.plan",
    "harness.dispatch",
    "harness.coverage",
    "harness.compare",
    "harness.report",
    "harness.publish",
    "harness.zoo.generated",
    "harness.progress",
    "harness.pipeline",
    "harness.bisect",
    "harness.repro",
    "harness.debt",
    "harness.commands",
    "harness.cli",
)
# Imports that go up a layer, each with why it stays for now; one that no longer happens
# must leave this list.
UPWARD_ALLOWED: set[tuple[str, str]] = set()


def _module_name(path: Path) -> str:
    parts = path.relative_to(HARNESS.parent).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def _import_graph() -> dict[str, set[str]]:
    """Every harness module -> the harness modules it imports, at the top or inside a
    function (`from harness.zoo import expect` names the module harness.zoo.expect;
    `from harness.zoo import ModelSpec`, the package harness.zoo)."""
    modules = {_module_name(p): p for p in _modules()}

    def module_of(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(module_of(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.update(module_of(f"{node.module}.{a.name}") for a in node.names)
        graph[name] = {m for m in found if m is not None and m != name}
    return graph


def _a_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph (its modules, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for imported in sorted(graph[module]):
            if cycle := visit(imported):
                return cycle
        path.pop()
        done.add(module)
        return None

    return next((c for m in sorted(graph) if (c := visit(m))), None)


def test_the_import_graph_of_harness_has_no_cycle() -> None:
    cycle = _a_cycle(_import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_a_cycle_is_found_and_named() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _a_cycle(graph) == ["a", "b", "c", "a"]
    assert _a_cycle({"a": {"b"}, "b": set(), "d": {"a", "b"}}) is None


def _layer(module: str) -> int:
    prefix = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS.index(prefix)


def test_no_module_imports_a_higher_layer() -> None:
    upward = {
        (module, imported)
        for module, imports in _import_graph().items()
        for imported in imports
        if _layer(imported) > _layer(module)
    }
    assert upward - UPWARD_ALLOWED == set(), "imports of a higher layer"
    assert UPWARD_ALLOWED - upward == set(), "allowed upward imports that no longer happen"


def test_every_stage_folder_is_a_layer() -> None:
    assert {f"harness.{stage}" for stage in STAGES} <= set(LAYERS)


def test_only_the_exporters_call_torch_onnx_and_only_dispatchs_shell_imports_ray() -> None:
    def users(prefix: str) -> set[str]:
        return {
            str(p.relative_to(HARNESS))
            for p in _modules()
            if any(n == prefix or n.startswith(prefix + ".") for n in _imports_of(p))
        }

    assert {u for u in users("torch.onnx") if not u.startswith("exporters/")} == set()
    assert users("ray") == {f"dispatch/{m}.py" for m in ("session", "remote", "driver")}
    assert users("matplotlib") == {"report/plots.py"}
