"""The dynamo exporter's ONNX function registry, built once per process and inputs.

Every `torch.onnx.export(..., dynamo=True)` call builds `ONNXRegistry.from_torchlib(opset)`
afresh: it re-reads and re-parses the source of each of onnxscript's ~560 torchlib
functions to infer their signatures (0.5-1.6 s a call on this machine; more than the whole
rest of a one-op export). The registry depends only on its inputs: the opset, torch's own
torchlib registry, onnxscript's torchlib registry and which of the ATen ops those name
exist in this process. So, for the duration of one export call, `from_torchlib` is
replaced by a memo keyed by exactly those inputs, which returns a copy of the registry it
built for them (the exporter may add custom translations to the registry it gets; the
copy keeps the memo clean). A translation registered or replaced later (a test fixture
replacing an onnxscript function, a library defining an op a torchlib function names)
changes the key, and the registry is built again.

The harness's calls take it: a dynamo or transformers exporter cell's (where its protocol
says so), and those made to explain a cell, whatever the protocol (the program before the
optimizer, the exporter's report of a failure, the op inventory's capture).

The exported model is byte for byte what the call exports without the memo
(tests/exporters/test_registry_memo.py; benchmarks/test_opinfo.py over every OpInfo). What
changes is the time: a memoised call's export time no longer includes rebuilding the
registry (the exporter cold start, a process's first export, still does). The first
miss in a process checks that the key reads the same functions the exporter's own
registry source lists; where it does not (another onnxscript), the memo turns itself off.
`HARNESS_REGISTRY_MEMO=0` turns it off for a run (the harness passes HARNESS_* variables
on to its workers); a suite's protocol turns it off for its cells (`registry_memo = false`:
the real-size suite, whose export times are held to a plain script's).

The same switch covers a second, smaller repetition: every call also materialises each
CompositeImplicitAutograd op the C++ dispatcher lists into `torch.ops` (torch's
`_materialize_cpp_cia_ops`, whose only effect is those attribute look-ups), once per
operator namespace and twice per call: about 50 ms of a one-op export's 180 ms here.
Within an export call it is skipped where the dispatcher lists exactly the ops it listed
when it last ran to the end in this process (the list is its whole input; an op
registered since, by a library or a cell, changes it and it runs again).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

if TYPE_CHECKING:
    from torch.onnx._internal.exporter._registration import ONNXRegistry

T = TypeVar("T")
# onnxscript's torchlib functions: (qualified name, its overloads' ids, its complex ones')
TorchlibSide = tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...]
# What `from_torchlib` reads (`registry_key`): class, opset, torch's torchlib entries (ids),
# onnxscript's functions, the names that did not resolve to an op.
RegistryKey = tuple[type, object, tuple[int, ...], TorchlibSide, frozenset[str]]

ENV = "HARNESS_REGISTRY_MEMO"
_CIA_KEY = "CompositeImplicitAutograd"


def enabled() -> bool:
    return os.environ.get(ENV, "1") != "0"


class _State:
    """This process's memo: registries by key, and whether the key is trusted here."""

    built: ClassVar[dict[RegistryKey, ONNXRegistry]] = {}
    trusted: bool | None = None  # None: not checked yet
    hits = 0
    misses = 0
    materialised: list[str] | None = None  # the CIA ops listed when it last ran to the end
    materialise_ran = 0
    materialise_skipped = 0


@contextlib.contextmanager
def memoised(*, wanted: bool = True) -> Iterator[None]:
    """Within the block, both memos (`memoised_registry`, `memoised_cia_materialisation`):
    around every `torch.onnx.export(..., dynamo=True)` the harness makes, the measured one
    (as its protocol says) and those it makes to explain a cell (re-exports, the program
    before the optimizer, the op inventory's capture), each else a rebuild of 0.4-1.6 s."""
    with memoised_registry(wanted=wanted), memoised_cia_materialisation(wanted=wanted):
        yield


@contextlib.contextmanager
def memoised_registry(*, wanted: bool = True) -> Iterator[None]:
    """Within the block, `ONNXRegistry.from_torchlib` answers from the memo (when wanted and
    enabled)."""
    if not (wanted and enabled()) or _State.trusted is False:
        yield
        return
    try:
        from torch.onnx._internal.exporter import _registration

        owner = _registration.ONNXRegistry
        raw = vars(owner)["from_torchlib"]
        build = raw.__func__
    except (ImportError, KeyError, AttributeError):  # another torch: the plain call
        yield
        return
    with _replaced(owner, "from_torchlib", classmethod(_memoised(build))):
        yield


@contextlib.contextmanager
def memoised_cia_materialisation(*, wanted: bool = True) -> Iterator[None]:
    """Within the block, torch's `_materialize_cpp_cia_ops` runs only where the dispatcher's
    list of CompositeImplicitAutograd ops changed since it last ran (when wanted and
    enabled)."""
    if not (wanted and enabled()):
        yield
        return
    try:
        from torch._export import utils

        raw = vars(utils)["_materialize_cpp_cia_ops"]
    except (ImportError, KeyError):  # another torch: the plain call
        yield
        return
    with _replaced(utils, "_materialize_cpp_cia_ops", _materialise_on_change(raw)):
        yield


@contextlib.contextmanager
def _replaced(owner: object, name: str, replacement: object) -> Iterator[None]:
    """`owner.name` is `replacement` within the block, and what it was after it."""
    raw = vars(owner)[name]
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, raw)


def _materialise_on_change(raw: Callable[[], None]) -> Callable[[], None]:
    import torch

    def materialise() -> None:
        listed = torch._C._dispatch_get_registrations_for_dispatch_key(_CIA_KEY)
        if listed == _State.materialised:
            _State.materialise_skipped += 1
            return
        raw()
        _State.materialise_ran += 1
        _State.materialised = listed

    return materialise


def _memoised(build: Callable[..., ONNXRegistry]) -> Callable[..., ONNXRegistry]:
    def from_torchlib(cls: type, *args: object, **kwargs: object) -> ONNXRegistry:
        opset = _opset(build, args, kwargs)
        key = registry_key(cls, opset)
        if key is None:
            return build(cls, *args, **kwargs)
        if key not in _State.built:
            _State.misses += 1
            with _exporters_listing() as listing:
                registry = build(cls, *args, **kwargs)
            if not _trust_key(listing):
                return registry
            _State.built[key] = registry
        else:
            _State.hits += 1
        return _copy(_State.built[key])

    return from_torchlib


def _opset(
    build: Callable[..., object], args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    import inspect

    bound = inspect.signature(build).bind(None, *args, **kwargs)
    bound.apply_defaults()
    return bound.arguments.get("opset_version")


def registry_key(cls: type, opset: object) -> RegistryKey | None:
    """Everything `from_torchlib` reads: the opset, torch's torchlib entries, onnxscript's
    torchlib functions (by identity), and the names that did not resolve to an op when
    the registry was built (a name that resolves later changes the key). None where the
    registries cannot be read."""
    try:
        # Importing the ops registers them, as the exporter's own listing does first.
        from onnxscript.function_libs.torch_lib import ops, registration
        from torch.onnx._internal.exporter._torchlib import _torchlib_registry

        del ops

        torch_side = tuple(id(m) for m in _torchlib_registry.get_torchlib_ops())
        onnxscript_side = tuple(
            (name, tuple(map(id, f.overloads)), tuple(map(id, f.complex)))
            for name, f in registration.default_registry.items()
            if not name.startswith("internal::")
        )
    except Exception:
        return None
    return (cls, opset, torch_side, onnxscript_side, _unresolved(onnxscript_side))


def _unresolved(onnxscript_side: TorchlibSide) -> frozenset[str]:
    """The qualified names that do not resolve to an op in this process, as `from_torchlib`
    asks (`_get_overload`). Only names unresolved at first sight are asked again: resolving
    is what can change, when a library defines an op later."""
    from torch.onnx._internal.exporter._registration import _get_overload

    names = frozenset(name for name, *_ in onnxscript_side)
    first = _Unresolved.names.get(names)
    if first is None:
        first = _Unresolved.names[names] = frozenset(n for n in names if _get_overload(n) is None)
    return frozenset(n for n in first if _get_overload(n) is None)


class _Unresolved:
    names: ClassVar[dict[frozenset[str], frozenset[str]]] = {}


class _Listing:
    """The exporter's own torchlib listing (`onnxscript_apis` in torch's registration
    module), passed through and recorded as `from_torchlib` reads it."""

    def __init__(self, apis: object) -> None:
        self.apis = apis
        self.listed: list[Any] | None = None

    def __getattr__(self, name: str) -> object:
        return getattr(self.apis, name)

    def get_torchlib_ops(self) -> list[Any]:
        self.listed = list(self.apis.get_torchlib_ops())  # type: ignore[attr-defined]
        return self.listed


@contextlib.contextmanager
def _exporters_listing() -> Iterator[_Listing | None]:
    """Within the block, what `from_torchlib` lists is recorded, for the key's check (the
    first build in a process only; None where this torch reads its listing elsewhere)."""
    from torch.onnx._internal.exporter import _registration

    if _State.trusted is not None or "onnxscript_apis" not in vars(_registration):
        yield None
        return
    listing = _Listing(vars(_registration)["onnxscript_apis"])
    with _replaced(_registration, "onnxscript_apis", listing):
        yield listing


def _trust_key(listing: _Listing | None) -> bool:
    """Once per process: the functions the key reads are those the exporter's registry
    source listed when it built (`listing`), so equal keys mean equal inputs. Read from the
    build itself: listing them again cost a fresh process 0.6 s, charged to its cold start."""
    if _State.trusted is None:
        listed = None if listing is None else listing.listed
        _State.trusted = listed is not None and _lists_what_the_key_reads(listed)
    return _State.trusted


def _lists_what_the_key_reads(listed: list[Any]) -> bool:
    try:
        from onnxscript.function_libs.torch_lib import registration

        named = {(m.qualified_name, id(m.function)) for m in listed}
        read = {
            (name, id(fn))
            for name, f in registration.default_registry.items()
            if not name.startswith("internal::")
            for fn in (*f.overloads, *f.complex)
        }
    except Exception:
        return False
    return named == read


def _copy(registry: T) -> T:
    """A registry equal to `registry` whose containers are its own: the exporter adds
    custom translations to the registry it is given."""
    fresh = object.__new__(type(registry))
    for name, value in vars(registry).items():
        if isinstance(value, dict):
            value = {k: list(v) if isinstance(v, list) else v for k, v in value.items()}
        elif isinstance(value, list):
            value = list(value)
        setattr(fresh, name, value)
    return fresh


def stats() -> dict[str, int]:
    """Hits and misses of this process's memo (for the benchmark and tests)."""
    return {
        "hits": _State.hits,
        "misses": _State.misses,
        "registries": len(_State.built),
        "materialisations": _State.materialise_ran,
        "materialisations_skipped": _State.materialise_skipped,
    }


def clear() -> None:
    """Forget every memoised registry (tests)."""
    _State.built.clear()
    _Unresolved.names.clear()
    _State.materialised = None
