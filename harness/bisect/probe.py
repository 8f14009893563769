"""Whether an environment holds a package set as asked: pure over what a probe in that
environment saw (`harness.store.environment.distribution_status`), light enough for the
probe's own process (`harness.bisect.child`) to import before anything else."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from harness.dispatch.cluster import VersionProbe


def same_version(installed: str, asked: str) -> bool:
    """`2.13.0+cpu` is the `2.13.0` asked for (a local label counts only where asked)."""
    try:
        have, want = Version(installed), Version(asked)
    except InvalidVersion:
        return installed == asked
    return have == want or (want.local is None and have.public == want.public)


def unusable(requirements: Iterable[str], found: VersionProbe) -> str | None:
    """Why an environment cannot run a set, as a probe in it saw it (`VersionProbe`): not
    set up, a package missing or at another version, or an import that fails; None where
    it can."""
    if "error" in found:
        return f"its environment could not be set up: {found['error']}"
    statuses = found.get("distributions")
    if not isinstance(statuses, dict):
        statuses = {}
    for requirement in requirements:
        package, _, version = requirement.partition("==")
        status = statuses.get(package) or {}
        have = status.get("version")
        if have is None or not same_version(have, version):
            return f"{package} {version} asked, {have or 'nothing'} installed"
        if status.get("import_error"):
            return f"{package} {version} does not import: {status['import_error']}"
    return None
