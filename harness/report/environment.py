"""The report's Environment section: what ran where, from the run's manifest.json."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from harness.report.document import MISSING, Facts, Section, Text, fmt


def environment_section(manifest: Mapping[str, Any]) -> Section:
    return Section("Environment", (Facts(tuple(environment_facts(manifest))),))


def environment_facts(m: Mapping[str, Any]) -> list[tuple[str, Text]]:
    harness = m.get("harness") or {}
    versions = m.get("versions") or {}
    items: list[tuple[str, Any]] = [
        ("run", m.get("run_id")),
        ("suite", m.get("suite")),
        ("started", m.get("started")),
        ("finished", m.get("finished") or f"{MISSING} (unfinished)"),
        ("duration", _duration(m.get("started"), m.get("finished"))),
        (
            "harness",
            " ".join(str(v) for v in (harness.get("version"), harness.get("git_sha")) if v),
        ),
        *((_versions_key(variant), _joined(v, " ")) for variant, v in versions.items()),
        ("hardware", _hardware(m.get("hardware") or {})),
        ("settings", _joined(_flatten(m.get("settings") or {}), "=")),
        ("matrix", m.get("matrix")),
    ]
    facts = [(k, Text(str(v))) for k, v in items if v not in (None, "")]
    command = " ".join(str(a) for a in m.get("command") or [])
    if command:
        facts.insert(5, ("command", Text(command, code=True)))
    for problem in m.get("zoo_problems") or []:
        # a zoo file that did not import: its models are missing from the matrix
        facts.append(
            ("zoo problem", Text(f"{problem.get('source')}: {problem.get('error')}", code=True))
        )
    return facts


def _versions_key(variant: str) -> str:
    return "versions" if variant == "base" else f"versions [{variant}]"


def _joined(values: Any, sep: str) -> str:
    if not isinstance(values, Mapping):
        return str(values)
    return " · ".join(f"{k}{sep}{v if v is not None else MISSING}" for k, v in values.items())


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in d.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _hardware(hw: Mapping[str, Any]) -> str:
    parts = [str(hw["cpu"])] if hw.get("cpu") else []
    if hw.get("cores") is not None:
        parts.append(f"{hw['cores']} cores")
    if hw.get("memory_gb") is not None:
        parts.append(f"{fmt(hw['memory_gb'])} GB RAM")
    gpus = hw.get("gpus") or []
    names = [g.get("name", str(g)) if isinstance(g, Mapping) else str(g) for g in gpus]
    parts.append("GPUs: " + ", ".join(names) if names else "no GPU")
    return ", ".join(parts) if hw else ""


def _duration(started: Any, finished: Any) -> str | None:
    try:
        seconds = (
            datetime.fromisoformat(finished) - datetime.fromisoformat(started)
        ).total_seconds()
    except (TypeError, ValueError):
        return None
    minutes, secs = divmod(round(seconds), 60)
    return (
        f"{minutes // 60}h {minutes % 60:02d}m {secs:02d}s"
        if minutes >= 60
        else f"{minutes}m {secs:02d}s"
    )
