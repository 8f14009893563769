"""Zoo discovery: the built-in `model_zoo/`, `--zoo` paths and the `harness.zoo`
entry-point group. Loading a file runs only that file; nothing registers itself."""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import hashlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol, cast

from harness.errors import UsageError
from harness.zoo.spec import DynamicShapes, ModelSpec

if TYPE_CHECKING:
    import torch

BUILTIN_ZOO = Path(__file__).resolve().parents[2] / "model_zoo"
ENTRY_POINT_GROUP = "harness.zoo"


class _Exportable(Protocol):
    """What the harness calls on a torch.onnx.ExportableModule (a torch.nn.Module)."""

    def example_arguments(self) -> tuple[tuple[object, ...], dict[str, object] | None]: ...

    def dynamic_shapes(self) -> DynamicShapes | None: ...


@dataclass(frozen=True)
class ZooProblem:
    """A zoo file that could not be imported; reported, and the other models still run."""

    source: str
    error: str


@dataclass(frozen=True)
class Zoo:
    models: dict[str, ModelSpec]
    problems: tuple[ZooProblem, ...] = ()

    def get(self, name: str) -> ModelSpec:
        try:
            return self.models[name]
        except KeyError:
            raise UsageError(f"unknown model {name!r}; `harness list` shows the zoo") from None

    def select(self, patterns: Sequence[str]) -> list[ModelSpec]:
        """Models matching any of `patterns`: exact names, globs, `tag:NAME`, `family:NAME`,
        or `KEY:GLOB` over an entry's metadata (`opinfo:nn.functional.*`, `dtype:float32`)."""
        chosen: dict[str, ModelSpec] = {}
        for pattern in patterns:
            hits = [m for m in self.models.values() if _selects(pattern, m)]
            if not hits:
                raise UsageError(
                    f"no model in the zoo matches {pattern!r}; `harness list` shows the zoo"
                )
            chosen.update((m.name, m) for m in hits)
        return sorted(chosen.values(), key=lambda m: m.name)


def _selects(pattern: str, spec: ModelSpec) -> bool:
    if pattern.startswith("tag:"):
        return pattern[4:] in spec.tags
    if pattern.startswith("family:"):
        return spec.family == pattern[7:]
    key, colon, value = pattern.partition(":")  # names never hold ':'
    if colon:
        return key in spec.metadata and fnmatch.fnmatchcase(str(spec.metadata[key]), value)
    return fnmatch.fnmatchcase(spec.name, pattern)


# -- discovery ---------------------------------------------------------------------------


def zoo_files(path: Path) -> list[Path]:
    """The entry files under `path`: the file itself, or every `*.py` below a folder
    (files and folders starting with `_` are helpers, not entries)."""
    if path.is_file():
        return [path]
    return sorted(
        p
        for p in path.rglob("*.py")
        if not any(part.startswith("_") for part in p.relative_to(path).parts)
    )


def load_file(path: Path) -> list[ModelSpec]:
    """Import one zoo file and return its specs, each tagged with the file as `source`.
    A worker imports it in each cell's own process (harness.runtime.zygote), so whatever
    the file does at import ends with the cell."""
    path = path.resolve()
    module_name = (
        "harness_zoo_" + hashlib.sha1(str(path).encode()).hexdigest()[:10] + "_" + path.stem
    )
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
    return _specs_of(sys.modules[module_name], str(path))


def _specs_of(module: ModuleType, source: str) -> list[ModelSpec]:
    if hasattr(module, "SPECS"):
        specs = list(module.SPECS)
    elif hasattr(module, "SPEC"):
        specs = [module.SPEC]
    else:
        raise UsageError(f"zoo file {source} defines neither SPEC nor SPECS")
    converted = []
    for s in specs:
        spec = s if isinstance(s, ModelSpec) else _from_exportable_module(s)
        if spec is None:
            raise UsageError(f"zoo file {source}: SPEC entries must be harness.zoo.ModelSpec")
        converted.append(_with_source(spec, source))
    return converted


def _with_source(spec: ModelSpec, source: str) -> ModelSpec:
    """The spec, noting where it comes from: a shallow copy (its fields were validated when
    it was made; a zoo of ~2000 OpInfo entries is reloaded for every cell of a worker)."""
    found = copy.copy(spec)
    object.__setattr__(found, "source", source)
    return found


def _from_exportable_module(obj: object) -> ModelSpec | None:
    """Accept an instance of torch.onnx.ExportableModule (torch >= 2.10) as a zoo entry."""
    exportable = _exportable_module_class()
    if exportable is None or not isinstance(obj, exportable):
        return None
    module = cast(_Exportable, obj)
    args, kwargs = module.example_arguments()
    name = getattr(obj, "zoo_name", type(obj).__name__.lower())
    family = getattr(obj, "zoo_family", "exportable")
    return ModelSpec(
        name=name,
        family=family,
        build=lambda: obj,
        example_inputs=lambda: tuple(args),
        example_kwargs=(lambda: dict(kwargs)) if kwargs else None,
        dynamic_shapes=module.dynamic_shapes(),
        tags=(family, "exportable-module"),
        description=(type(obj).__doc__ or "").strip().split("\n")[0],
    )


def _exportable_module_class() -> type[torch.nn.Module] | None:
    onnx_module = sys.modules.get("torch.onnx")
    return getattr(onnx_module, "ExportableModule", None) if onnx_module else None


def load_entry_point(name: str) -> list[ModelSpec]:
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            loaded = ep.load()
            source = f"entry-point:{ep.name}"
            if callable(loaded) and not hasattr(loaded, "SPEC") and not hasattr(loaded, "SPECS"):
                return [dataclasses.replace(s, source=source) for s in loaded()]
            return _specs_of(loaded, source)
    raise UsageError(f"no {ENTRY_POINT_GROUP} entry point named {name!r}")


def load_source(source: str) -> list[ModelSpec]:
    """The specs of one source (a file path, `entry-point:NAME` or `checkpoint:LOCATION`),
    as a worker loads them."""
    if source.startswith("entry-point:"):
        return load_entry_point(source.split(":", 1)[1])
    if source.startswith(CHECKPOINT):
        return [checkpoint_spec(source.removeprefix(CHECKPOINT))]
    return load_file(Path(source))


CHECKPOINT = "checkpoint:"
HF_PREFIX = "hf:"  # `--models hf:PATH_OR_REPO`


def checkpoint_spec(location: str) -> ModelSpec:
    """The entry of a saved Hugging Face checkpoint (model_zoo/transformers/_checkpoint.py);
    one that cannot be an entry (no such directory, no config.json, a class the installed
    transformers lacks) is a user's mistake: exit 2, one line."""
    from model_zoo.transformers._checkpoint import CheckpointError, checkpoint

    try:
        return checkpoint(location)
    except CheckpointError as exc:
        raise UsageError(str(exc)) from None


def with_checkpoints(zoo: Zoo, patterns: Iterable[str]) -> tuple[Zoo, tuple[str, ...]]:
    """The zoo with the checkpoints `--models` names (`hf:PATH_OR_REPO`) added, and the
    patterns with each of those named by its entry's name. Two checkpoints of one name (two
    folders called `bert`) are exit 2: one would stand for the other."""
    names = []
    for pattern in patterns:
        if pattern.startswith(HF_PREFIX):
            spec = checkpoint_spec(pattern.removeprefix(HF_PREFIX))
            known = zoo.models.setdefault(spec.name, spec)
            if known.metadata.get("path") != spec.metadata["path"]:
                raise UsageError(
                    f"{pattern} and {known.metadata.get('path') or known.source} are both the"
                    f" model {spec.name}: rename a folder, or declare them in a zoo file with"
                    " checkpoint(PATH, name=NAME)"
                )
            pattern = spec.name
        names.append(pattern)
    return zoo, tuple(names)


def located(patterns: Iterable[str]) -> tuple[str, ...]:
    """`--models` as the run keeps it: a local checkpoint by its absolute path
    (`hf:./my-bert` is `hf:/home/me/my-bert`), so that the run's other commands (repro,
    debt, resume) find it from any folder."""
    from model_zoo.transformers._checkpoint import absolute

    return tuple(
        HF_PREFIX + absolute(p.removeprefix(HF_PREFIX)) if p.startswith(HF_PREFIX) else p
        for p in patterns
    )


def discover(
    extra_paths: Iterable[Path] = (),
    *,
    builtin: bool = True,
    entry_points: bool = True,
) -> Zoo:
    """Build the zoo: built-in entries, then entry points, then `--zoo` paths.

    A missing `--zoo` path or a file without SPEC is a user error (exit 2); a file that
    raises on import is recorded as a `ZooProblem` and the rest of the zoo still loads.
    """
    sources: list[Path] = []
    if builtin and BUILTIN_ZOO.is_dir():
        sources += zoo_files(BUILTIN_ZOO)
    for path in extra_paths:
        if not path.exists():
            raise UsageError(f"--zoo path {path} does not exist")
        files = zoo_files(path)
        if not files:
            raise UsageError(f"--zoo path {path} holds no zoo entry files (*.py)")
        known = {s.resolve() for s in sources}  # a --zoo path inside model_zoo/ adds nothing twice
        sources += [f for f in files if f.resolve() not in known]

    models: dict[str, ModelSpec] = {}
    problems: list[ZooProblem] = []

    def add(specs: list[ModelSpec]) -> None:
        for spec in specs:
            if spec.name in models:
                raise UsageError(
                    f"model {spec.name!r} is defined twice: in {models[spec.name].source} and {spec.source}"
                )
            models[spec.name] = spec

    for file in sources:
        try:
            add(load_file(file))
        except UsageError:
            raise
        except (Exception, SystemExit) as exc:  # a broken plugin must not stop the others
            problems.append(ZooProblem(str(file), import_error(exc)))
    if entry_points:
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                add(load_entry_point(ep.name))
            except UsageError:
                raise
            except (Exception, SystemExit) as exc:
                problems.append(ZooProblem(f"entry-point:{ep.name}", import_error(exc)))
    return Zoo(models=dict(sorted(models.items())), problems=tuple(problems))


def import_error(exc: BaseException) -> str:
    """'RuntimeError: ...'; a zoo file that calls sys.exit at import (which used to end
    the whole harness with its exit code and no word) says so."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: the file calls sys.exit({exc.code!r}) when imported"
    return f"{type(exc).__name__}: {exc}"
