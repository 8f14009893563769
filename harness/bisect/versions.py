"""Which versions a bisection walks: the versions a package index or a folder of wheels
offers for a package, in PEP 440 order (`packaging.version`, as pip orders them), from the
good version to the bad one. Pure: `harness.bisect.index` asks pip what is offered."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version


class VersionError(ValueError):
    """A package or version the bisection cannot use: a usage error (exit 2)."""


@dataclass(frozen=True)
class Move:
    """One package's move between the good and the bad environment."""

    package: str
    good: str
    bad: str

    def spec(self, version: str) -> str:
        return f"{self.package}=={version}"


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name: `Onnx_IR` and `onnx-ir` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_version(text: str, flag: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise VersionError(f"{flag} {text!r} is not a version (PEP 440, e.g. 0.5.4)") from None


def offered_versions(pip_json: str) -> list[str]:
    """The versions of `pip index versions --json` output, as offered."""
    try:
        listing = json.loads(pip_json)
        return [str(v) for v in listing["versions"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise VersionError(f"cannot read pip's list of versions ({exc})") from None


def offered_versions_text(pip_text: str) -> list[str]:
    """The versions of `pip index versions` text output (an older pip, without `--json`):
    its `Available versions: a, b, c` line."""
    for line in pip_text.splitlines():
        head, sep, listed = line.partition("Available versions:")
        if sep and not head.strip():
            return [v.strip() for v in listed.split(",") if v.strip()]
    raise VersionError("cannot read pip's list of versions (no 'Available versions:' line)")


def walk(
    offered: Iterable[str],
    move: Move,
    *,
    pre: bool = False,
    source: str = "the index",
    fix: bool = False,
) -> tuple[str, ...]:
    """good, every offered version strictly between, bad: in order. Pre-releases count
    where `pre` is set or where good or bad is one (as pip takes a pre-release only when
    asked for one); versions that do not parse are left out, as pip leaves them. With
    `fix`, good is the newer end (the version that no longer has the finding) and the walk
    runs down from it: its first bad version is the last one before the fix."""
    good, bad = parse_version(move.good, "--good"), parse_version(move.bad, "--bad")
    if not fix and good >= bad:
        raise VersionError(
            f"--good {move.good} must be older than --bad {move.bad} ({move.package});"
            " --fix bisects for the version that fixed a finding"
        )
    if fix and good <= bad:
        raise VersionError(
            f"--fix: --good {move.good} (the fixed version) must be newer than --bad {move.bad}"
            f" ({move.package})"
        )
    pre = pre or good.is_prerelease or bad.is_prerelease
    versions = _parsed(offered)
    for flag, wanted in (("--good", good), ("--bad", bad)):
        if wanted not in versions:
            raise VersionError(_not_offered(flag, move.package, wanted, versions, source))
    between = _between(versions, good, bad, pre=pre)
    return (
        versions[good],
        *(versions[v] for v in (between[::-1] if fix else between)),
        versions[bad],
    )


def _between(
    versions: Iterable[Version], good: Version, bad: Version, *, pre: bool
) -> list[Version]:
    """The versions strictly between, one per release: builds of one release (`2.13.0` and
    `2.13.0+cpu`, which an index with torch's own builds offers both) are one version, named
    without the local label where it is offered so, and none of the ends' releases."""
    low, high = sorted((good, bad))
    ends = {good.public, bad.public}
    found: dict[str, Version] = {}
    for v in sorted(versions):
        if not (low < v < high) or v.public in ends or (v.is_prerelease and not pre):
            continue
        if v.public not in found or (found[v.public].local and not v.local):
            found[v.public] = v
    return sorted(found.values())


def _parsed(offered: Iterable[str]) -> dict[Version, str]:
    found: dict[Version, str] = {}
    for text in offered:
        try:
            found.setdefault(Version(text), text)
        except InvalidVersion:
            continue
    return found


def _not_offered(
    flag: str, package: str, wanted: Version, versions: dict[Version, str], source: str
) -> str:
    if not versions:
        return f"{source} offers no version of {package}"
    below = [v for v in versions if v < wanted]
    above = [v for v in versions if v > wanted]
    near = [str(v) for v in (max(below) if below else None, min(above) if above else None) if v]
    return (
        f"{flag} {wanted}: {source} does not offer {package} {wanted}"
        f" (nearest: {' and '.join(near)})"
    )
