"""transformers' workarounds around torch.export and torch.onnx, one by one: the patches it
installs while exporting (`transformers.exporters.utils._PATCHES[backend]`: `(object path,
attribute, factory)`), its FX node and program fixes (`_FX_NODE_FIXES`,
`_FX_PROGRAM_FIXES`), its ONNX IR fixes (`exporter_onnx._IR_FIXES`) and its own ONNX
translations (`exporter_onnx._ONNX_TRANSLATION_TABLE`, passed to `torch.onnx.export` as
`custom_translation_table`: `_aten_grouped_mm` for the mixture-of-experts op torchlib lacks).
Each is named by its function (`exporter_onnx._patch_where`); a factory registered on several
paths, or a translation on several ops, is one workaround.

`observed()` records which of them did something during an export (a patch's replacement
was called, a node fix took a node, an IR fix changed the graph, a translated op is in the
program `torch.onnx.export` translated); `disabled(*names)` turns them off (a patch installs the
original, a fix does nothing, a translation leaves the table). The debt search
(harness.debt.search) turns off those an export used, in groups and alone.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

PatchEntry = tuple[str, str, Callable[[Any], Any]]


def _registries() -> tuple[dict[str, list[PatchEntry]], list[list[Callable[..., Any]]]]:
    """The patch registry, and every list of fixes (node, program and IR), as transformers
    holds them (imported here: importing its exporters registers them all)."""
    from transformers.exporters import exporter_onnx, utils

    fixes = [*utils._FX_NODE_FIXES.values(), *utils._FX_PROGRAM_FIXES.values()]
    return utils._PATCHES, [*fixes, exporter_onnx._IR_FIXES]


def name_of(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", "") or ""
    return f"{module.rsplit('.', 1)[-1]}.{getattr(fn, '__name__', repr(fn))}"


def _translations() -> dict[Any, Callable[..., Any]]:
    """transformers' ONNX translations by op, the dict its exporter passes on."""
    from transformers.exporters import exporter_onnx

    table: dict[Any, Callable[..., Any]] = exporter_onnx._ONNX_TRANSLATION_TABLE
    return table


def workarounds() -> list[str]:
    """Every workaround the installed transformers registers, by name, sorted."""
    patches, fixes = _registries()
    found = {name_of(fn) for entries in patches.values() for _, _, fn in entries}
    found |= {name_of(fn) for fix_list in fixes for fn in fix_list}
    found |= {name_of(fn) for fn in _translations().values()}
    return sorted(found)


@contextlib.contextmanager
def _swapped(
    wrap_patch: Callable[[Callable[[Any], Any]], Callable[[Any], Any]],
    wrap_fix: Callable[[Callable[..., Any]], Callable[..., Any]],
) -> Iterator[None]:
    """Each registered factory and fix replaced by its wrapped self, in place (the export
    reads the registries when it runs); the originals back afterwards."""
    patches, fixes = _registries()
    saved_patches = {backend: list(entries) for backend, entries in patches.items()}
    saved_fixes = [list(fix_list) for fix_list in fixes]
    try:
        for entries in patches.values():
            entries[:] = [(path, attr, wrap_patch(fn)) for path, attr, fn in entries]
        for fix_list in fixes:
            fix_list[:] = [wrap_fix(fn) for fn in fix_list]
        yield
    finally:
        for backend, entries in saved_patches.items():
            patches[backend][:] = entries
        for fix_list, saved in zip(fixes, saved_fixes, strict=True):
            fix_list[:] = saved


@contextlib.contextmanager
def observed() -> Iterator[set[str]]:
    """The names of the workarounds that did something while the block ran."""
    used: set[str] = set()

    def wrap_patch(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        name = name_of(factory)

        def install(original: Any) -> Any:
            replacement = factory(original)
            if isinstance(replacement, type) or not callable(replacement):
                used.add(name)  # a class or a value: in place is all it does
                return replacement

            @functools.wraps(replacement)
            def called(*args: Any, **kwargs: Any) -> Any:
                used.add(name)
                return replacement(*args, **kwargs)

            return called

        return install

    def wrap_fix(fix: Callable[..., Any]) -> Callable[..., Any]:
        name = name_of(fix)

        @functools.wraps(fix)
        def fixed(*args: Any) -> Any:
            before = _fingerprint(args[0])
            result = fix(*args)
            if result is True or (result is None and _fingerprint(args[0]) != before):
                used.add(name)
            return result

        return fixed

    with _swapped(wrap_patch, wrap_fix), _translations_observed(used):
        yield used


@contextlib.contextmanager
def _translations_observed(used: set[str]) -> Iterator[None]:
    """`torch.onnx.export` watched while the block runs: where it is given transformers'
    table, the translations of the ops in the program it translated (after its
    decompositions, which keep the table's ops) go into `used`."""
    import torch.onnx

    table, export = _translations(), torch.onnx.export

    @functools.wraps(export)
    def watched(*args: Any, **kwargs: Any) -> Any:
        program = export(*args, **kwargs)
        translated = getattr(program, "exported_program", None)
        if kwargs.get("custom_translation_table") is table and translated is not None:
            ops = {node.target for node in translated.graph.nodes}
            used.update(name_of(fn) for op, fn in table.items() if op in ops)
        return program

    torch.onnx.export = watched
    try:
        yield
    finally:
        torch.onnx.export = export


def _fingerprint(graph: Any) -> object:
    """What an IR fix may change in an ONNX IR graph (its nodes' types, inputs and
    attributes); None for anything else (a node fix's graph module: it says True)."""
    nodes = getattr(graph, "__iter__", None)
    if nodes is None or not hasattr(graph, "initializers"):
        return None
    return [
        (n.op_type, tuple(str(v) for v in n.inputs), tuple(sorted(map(str, n.attributes.items()))))
        for n in graph
    ]


@contextlib.contextmanager
def disabled(*names: str) -> Iterator[None]:
    """The workarounds `names` off while the block runs (every other one as registered)."""

    def wrap_patch(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return (lambda original: original) if name_of(factory) in names else factory

    def wrap_fix(fix: Callable[..., Any]) -> Callable[..., Any]:
        return _does_nothing if name_of(fix) in names else fix

    table = _translations()
    removed = {op: fn for op, fn in table.items() if name_of(fn) in names}
    for op in removed:
        del table[op]
    try:
        with _swapped(wrap_patch, wrap_fix):
            yield
    finally:
        table.update(removed)


def _does_nothing(*_: Any) -> bool:
    return False
