"""Suite files (`suites/<name>.toml`), validated into frozen dataclasses (the measurement
protocol they carry is harness.store.protocol). Every problem is a `UsageError` naming the file (and line, where TOML says)."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import exporters
from harness.errors import UsageError
from harness.exporters import patches
from harness.plan.matrix import DYNAMIC_ONLY
from harness.store.axes import LIST_AXES, PATCH, Axis
from harness.store.options import Shapes
from harness.store.protocol import Protocol
from harness.store.records import DEVICES

SUITES_DIR = Path(__file__).resolve().parents[2] / "suites"
DEFAULT_EXPORTERS = ("dynamo", "torchscript")
DEFAULT_OPSETS = (17, 18, 20)


@dataclass(frozen=True)
class Suite:
    name: str
    source: str
    models: tuple[str, ...]
    exporters: tuple[str, ...] = DEFAULT_EXPORTERS
    opsets: dict[str, tuple[int, ...]] = field(default_factory=dict)
    devices: tuple[str, ...] = ("cpu",)
    dynamic: Shapes = Shapes.STATIC  # a suite file's false, true or "only"
    description: str = ""
    protocol: Protocol = Protocol()
    # Each list axis's values (harness.store.axes), by the axis's name, as the suite file's
    # key for it names them (validated); an axis not here: its default.
    axes: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)

    def values(self, axis: Axis[Any]) -> tuple[Any, ...]:
        """The axis's values this suite runs."""
        return tuple(self.axes.get(axis.name, (axis.default,)))

    def opsets_for(self, exporter: str) -> tuple[int, ...]:
        return self.opsets.get(exporter, self.opsets.get("*", DEFAULT_OPSETS))


def available_suites() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def suite_path(name_or_path: str) -> Path:
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        path = Path(name_or_path)
        if not path.is_file():
            raise UsageError(f"suite file {path} does not exist")
        return path
    path = SUITES_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        known = ", ".join(available_suites())
        raise UsageError(f"unknown suite {name_or_path!r} (known: {known})")
    return path


def load_suite(name_or_path: str) -> Suite:
    path = suite_path(name_or_path)
    text = _text(path)
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where = str(exc).replace(
            "(at end of document)", f"(at the end of the file, line {len(text.splitlines())})"
        )
        raise UsageError(f"suite file {path} is not valid TOML: {where}") from None
    return parse_suite(table, name=path.stem, source=str(path))


def _text(path: Path) -> str:
    """The suite file's text; TOML is UTF-8, and a file that is not says where."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(
            f"suite file {path} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line});"
            " TOML files are UTF-8"
        ) from None


_SUITE_KEYS = {
    "description",
    "models",
    "exporters",
    "opsets",
    "devices",
    "dynamic",
    "protocol",
    *(a.plural for a in LIST_AXES if a.plural),
}


def parse_suite(table: dict[str, Any], *, name: str, source: str) -> Suite:
    unknown = sorted(set(table) - _SUITE_KEYS)
    if unknown:
        raise UsageError(
            f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(_SUITE_KEYS))})"
        )
    models = _string_list(table, "models", source, required=True)
    exporters = validate_exporters(
        _string_list(table, "exporters", source) or DEFAULT_EXPORTERS, source
    )
    devices = validate_devices(_string_list(table, "devices", source) or ("cpu",), source)
    opsets = _opsets(table.get("opsets", list(DEFAULT_OPSETS)), exporters, source)
    given = table.get("dynamic", False)
    if not isinstance(given, bool) and given != DYNAMIC_ONLY:
        raise UsageError(f"{source}: 'dynamic' must be true, false or \"{DYNAMIC_ONLY}\"")
    dynamic = Shapes.of(given)
    axes = {
        a.name: validate_values(a, named, source)
        for a in LIST_AXES
        if (named := _string_list(table, str(a.plural), source))
    }
    description = table.get("description", "")
    if not isinstance(description, str):
        raise UsageError(f"{source}: 'description' must be a string")
    protocol_table = table.get("protocol", {})
    if not isinstance(protocol_table, dict):
        raise UsageError(
            f"{source}: 'protocol' must be a table ([protocol] with key = value lines)"
        )
    protocol = Protocol.from_table(protocol_table, source)
    return Suite(
        name,
        source,
        models,
        exporters,
        opsets,
        devices,
        dynamic,
        description,
        protocol,
        axes,
    )


def _string_list(
    table: dict[str, Any], key: str, source: str, *, required: bool = False
) -> tuple[str, ...]:
    value = table.get(key)
    if value is None:
        if required:
            raise UsageError(f"{source}: missing required key {key!r}")
        return ()
    if not isinstance(value, list) or not value or not all(_texty(v) for v in value):
        raise UsageError(f"{source}: {key!r} must be a non-empty list of strings")
    return tuple(str(v) for v in value)


def _texty(value: object) -> bool:
    """A string, or a whole number written as one (`batches = [0, 4]`)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _opsets(value: Any, exporters: tuple[str, ...], source: str) -> dict[str, tuple[int, ...]]:
    """`opsets = [17, 18, 20]` for every exporter (those `--exporters` adds too, under `*`),
    or a table `[opsets] dynamo = [...]`."""
    if isinstance(value, list):
        every = {e: validate_opsets(value, e, source) for e in exporters}
        return {**every, "*": _opset_list(value, source)}
    if isinstance(value, dict):
        unknown = sorted(set(value) - {*exporters, "*"})
        if unknown:
            raise UsageError(
                f"{source}: [opsets] names exporter {unknown[0]!r}, which the suite does not run"
            )
        default = value.get("*", list(DEFAULT_OPSETS))
        every = {e: validate_opsets(value.get(e, default), e, source) for e in exporters}
        return {**every, "*": _opset_list(default, source)}
    raise UsageError(f"{source}: 'opsets' must be a list of integers or a table per exporter")


def validate_exporters(names: tuple[str, ...] | list[str], source: str) -> tuple[str, ...]:
    return _known(names, exporters.NAMES, "exporter", source)


def validate_values(
    axis: Axis[Any], names: tuple[str, ...] | list[str], source: str
) -> tuple[Any, ...]:
    """A list axis's values, named by a flag or a suite key, read as the axis holds them."""
    known = patches.NAMES if axis is PATCH else axis.known() if axis.known else None
    named = dict.fromkeys(names) if known is None else _known(names, known, axis.title, source)
    return tuple(_parsed(axis, n, source) for n in named)


def _parsed(axis: Axis[Any], name: str, source: str) -> Any:
    try:
        return axis.parse(name)
    except ValueError as exc:
        raise UsageError(f"{source}: {axis.title} {name!r}: {exc}") from None


def validate_devices(names: tuple[str, ...] | list[str], source: str) -> tuple[str, ...]:
    return _known(names, DEVICES, "device", source)


def _known(
    names: tuple[str, ...] | list[str], known: Sequence[str], what: str, source: str
) -> tuple[str, ...]:
    """`names` without repeats; UsageError naming the first one that is not `known`."""
    for name in names:
        if name not in known:
            raise UsageError(f"{source}: unknown {what} {name!r} (known: {', '.join(known)})")
    return tuple(dict.fromkeys(names))


def validate_opsets(values: Any, exporter: str, source: str) -> tuple[int, ...]:
    opsets = _opset_list(values, source, f"opsets for {exporter}")
    registered = exporters.get(exporter)
    for v in opsets:
        if problem := registered.opset_problem(v):
            raise UsageError(f"{source}: {problem}")
    return opsets


def _opset_list(values: Any, source: str, what: str = "opsets") -> tuple[int, ...]:
    """A non-empty list of integers, sorted without repeats (which exporter can take each
    is checked where the exporter is known: `validate_opsets`)."""
    if not isinstance(values, list | tuple) or not values:
        raise UsageError(f"{source}: {what} must be a non-empty list of integers")
    for v in values:
        if not isinstance(v, int) or isinstance(v, bool):
            raise UsageError(f"{source}: opset {v!r} is not an integer")
    return tuple(sorted(set(values)))
