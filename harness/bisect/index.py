"""What pip says about a package, asked through pip itself (this interpreter's `python -m
pip`, with its configuration): the versions an index or a folder of wheels offers (`pip
index versions --json`), and whether a set of requirements installs here (`pip install
--dry-run --report -`, which resolves dependencies without installing anything). The
runtime_env of each version is built by the same pip with the same options."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.bisect.versions import VersionError, offered_versions, offered_versions_text

PIP_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class PipSource:
    """Where versions come from: a folder of wheels (`--find-links`, no index), an index
    URL, or pip's configured index (PyPI by default)."""

    find_links: str | None = None
    index_url: str | None = None

    def options(self) -> tuple[str, ...]:
        """pip options, also for each version's runtime_env."""
        if self.find_links:
            return ("--no-index", f"--find-links={Path(self.find_links).resolve()}")
        if self.index_url:
            return (f"--index-url={self.index_url}",)
        return ()

    def describe(self) -> str:
        if self.find_links:
            return f"the folder {self.find_links}"
        return self.index_url or "pip's index"


@dataclass(frozen=True)
class Installable:
    """Whether a set of requirements installs here, what pip would install for it, or why not."""

    ok: bool
    installs: tuple[str, ...] = ()
    reason: str | None = None


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check"]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"pip took over {PIP_TIMEOUT_S:g} s")


def pip_error(stderr: str) -> str:
    """pip's own reason: its last `ERROR:` line, else its last line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln.removeprefix("ERROR: ") for ln in lines if ln.startswith("ERROR:")]
    return (errors or lines or ["pip failed without a message"])[-1][:500]


def list_versions(package: str, source: PipSource) -> list[str]:
    """Every version `source` offers for `package` here (pre-releases included; the walk
    decides which count), as pip lists them: only those this Python and platform can
    install."""
    done = _pip("index", "versions", package, "--json", "--pre", *source.options())
    if done.returncode != 0 and "no such option: --json" in done.stderr:
        done = _pip("index", "versions", package, "--pre", *source.options())
        if done.returncode == 0:
            return offered_versions_text(done.stdout)
    if done.returncode != 0:
        raise VersionError(
            f"--package {package}: {source.describe()} offers no such package ({pip_error(done.stderr)})"
        )
    return offered_versions(done.stdout)


def dry_run(requirements: tuple[str, ...], source: PipSource) -> Installable:
    """Resolve `requirements` on top of this environment without installing (what Ray's pip
    will do in the runtime_env, which sees this environment's packages)."""
    done = _pip(
        "install", "--dry-run", "--quiet", "--report", "-", *source.options(), *requirements
    )
    if done.returncode != 0:
        return Installable(False, reason=f"pip cannot install it: {pip_error(done.stderr)}")
    try:
        report = json.loads(done.stdout)
        items = report.get("install", [])
        installs = tuple(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items)
    except (ValueError, KeyError, TypeError, AttributeError):
        installs = ()
    return Installable(True, installs=installs)
