"""The report's Environment section: what ran where, from the run's manifest.json."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from harness.report.document import MISSING, Facts, Section, Text, fmt
from harness.store.manifest import Hardware, HarnessInfo, JsonValue, Manifest


def environment_section(manifest: Manifest) -> Section:
    return Section("Environment", (Facts(tuple(environment_facts(manifest))),))


def environment_facts(m: Manifest) -> list[tuple[str, Text]]:
    harness = m.harness or HarnessInfo()
    # the settings given: a limit not set (no --max-memory-gb, graphs not kept) is left out
    given = m.settings.to_dict() if m.settings else {}
    settings = {k: v for k, v in given.items() if v is not None}
    items: list[tuple[str, object]] = [
        ("run", m.run_id),
        ("suite", m.suite),
        ("started", m.started),
        ("finished", m.finished or f"{MISSING} (unfinished)"),
        ("duration", _duration(m.started, m.finished)),
        ("harness", " ".join(v for v in (harness.version, harness.git_sha) if v)),
        *((_versions_key(variant), _joined(v, " ")) for variant, v in m.versions.items()),
        ("hardware", _hardware(m.hardware)),
        ("settings", _joined(_flatten(settings), "=")),
        ("matrix", m.matrix),
    ]
    facts = [(k, Text(str(v))) for k, v in items if v not in (None, "")]
    command = " ".join(m.command)
    if command:
        facts.insert(5, ("command", Text(command, code=True)))
    # a zoo file that did not import: its models are missing from the matrix
    facts += [("zoo problem", Text(f"{p.source}: {p.error}", code=True)) for p in m.zoo_problems]
    return facts


def _versions_key(variant: str) -> str:
    return "versions" if variant == "base" else f"versions [{variant}]"


def _joined(values: Mapping[str, object], sep: str) -> str:
    return " · ".join(f"{k}{sep}{v if v is not None else MISSING}" for k, v in values.items())


def _flatten(d: Mapping[str, JsonValue], prefix: str = "") -> dict[str, JsonValue]:
    flat: dict[str, JsonValue] = {}
    for key, value in d.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        elif value != []:  # a setting that lists nothing (no extra thread counts) says nothing
            flat[f"{prefix}{key}"] = value
    return flat


def _hardware(hw: Hardware | None) -> str:
    if hw is None:
        return ""
    cpu = " ".join(filter(None, (hw.cpu, f"({hw.cpu_id})" if hw.cpu_id else None)))
    parts = [cpu] if cpu else []
    if hw.cores is not None:
        parts.append(f"{hw.cores} cores")
    if hw.memory_gb is not None:
        parts.append(f"{fmt(hw.memory_gb)} GB RAM")
    parts.append("GPUs: " + ", ".join(hw.gpus) if hw.gpus else "no GPU")
    return ", ".join(parts)


def _duration(started: str | None, finished: str | None) -> str | None:
    if started is None or finished is None:
        return None
    try:
        seconds = (
            datetime.fromisoformat(finished) - datetime.fromisoformat(started)
        ).total_seconds()
    except (TypeError, ValueError):  # an offset on one time only, or not a time
        return None
    minutes, secs = divmod(round(seconds), 60)
    return (
        f"{minutes // 60}h {minutes % 60:02d}m {secs:02d}s"
        if minutes >= 60
        else f"{minutes}m {secs:02d}s"
    )
