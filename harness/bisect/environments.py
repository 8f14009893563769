"""Python environments of their own for `harness bisect --isolation env`: one venv per
package set, made once under a cache folder and kept between tries and bisections (its
folder is named by the set and a hash of everything it was made from: the requirements,
pip's source, this environment and this Python), so that a set tried again installs nothing.

Each is an overlay: a venv whose own site-packages come first and whose `.pth` adds this
environment's site-packages after them (`site.addsitedir`, so that an editable install of
the harness works there too): the harness, Ray and whatever the set does not move are this
environment's, nothing copied. A set's packages come either from `pip install` into the
venv (pip sees this environment underneath, installs only what differs, and never
uninstalls what is outside the venv), or, with `--environments DIR`, from a venv made
beforehand, DIR/<name> (`torch-2.13.0`, `torch-2.13.0-onnxscript-0.6.2`: each requirement's
`package-version`, in order), overlaid the same way: torch's wheels weigh several GB.

A venv is made in a temporary folder beside its final one and renamed into place once
complete, so an interrupted install leaves nothing that looks kept."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import venv
from dataclasses import dataclass
from pathlib import Path

from harness.bisect.index import PIP_TIMEOUT_S, PipSource, pip_error
from harness.bisect.result import EnvUse
from harness.bisect.versions import canonical_name

MARK = "harness-env.json"  # written last: an environment without it is not kept
OVERLAY = "zz_harness_overlay.pth"
_SITE = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"


@dataclass(frozen=True)
class Environment:
    """A set's environment (its Python and what pip installed there), or why it has none."""

    python: Path | None
    use: EnvUse | None = None
    installs: tuple[str, ...] = ()
    reason: str | None = None


def base_site_dirs() -> tuple[str, ...]:
    """This environment's site-packages folders, as the overlays see them."""
    paths = sysconfig.get_paths()
    return tuple(dict.fromkeys(str(Path(paths[k]).resolve()) for k in ("purelib", "platlib")))


def env_name(requirements: tuple[str, ...]) -> str:
    """`torch==2.13.0`, `onnxscript==0.6.2` -> `torch-2.13.0-onnxscript-0.6.2`."""
    parts = (r.partition("==") for r in requirements)
    return "-".join(f"{canonical_name(p)}-{v}" if v else canonical_name(p) for p, _, v in parts)


@dataclass(frozen=True)
class Environments:
    """Where sets' environments are made and kept (`cache`), from pip's `source` or, where
    `premade` is given, from the venvs made beforehand in that folder."""

    cache: Path
    source: PipSource
    premade: Path | None = None

    def get(self, requirements: tuple[str, ...]) -> Environment:
        """The set's environment: kept from before, or made now."""
        name = env_name(requirements)
        origin = self._premade(name) if self.premade else None
        if self.premade and origin is None:
            return Environment(
                None, reason=f"no environment {self.premade / name} (made beforehand)"
            )
        folder = self.cache / f"{name}-{self._key(requirements, origin)}"
        if (kept := _kept(folder)) is not None:
            return kept
        return self._make(folder, requirements, origin)

    def _premade(self, name: str) -> Path | None:
        assert self.premade is not None
        site = self.premade / name / _SITE
        return site.resolve() if site.is_dir() else None

    def _key(self, requirements: tuple[str, ...], origin: Path | None) -> str:
        made_from = {
            "requirements": list(requirements),
            "pip": list(self.source.options()),
            "premade": str(origin) if origin else None,
            "base": list(base_site_dirs()),
            "python": sys.version,
        }
        text = json.dumps(made_from, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def _make(
        self, folder: Path, requirements: tuple[str, ...], origin: Path | None
    ) -> Environment:
        started = time.perf_counter()
        building = folder.with_name(f".{folder.name}.{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        venv.create(building, with_pip=False, symlinks=True)
        sites = [str(origin)] if origin else []
        lines = [f"import site; site.addsitedir({d!r})" for d in (*sites, *base_site_dirs())]
        (building / _SITE / OVERLAY).write_text("\n".join(lines) + "\n")
        installs: tuple[str, ...] = ()
        if origin is None:
            installed = _pip_install(building, requirements, self.source)
            if isinstance(installed, str):
                shutil.rmtree(building, ignore_errors=True)
                return Environment(None, reason=f"pip cannot install it: {installed}")
            installs = installed
        seconds = round(time.perf_counter() - started, 1)
        mark = {"requirements": list(requirements), "installs": list(installs), "seconds": seconds}
        (building / MARK).write_text(json.dumps(mark, indent=2) + "\n")
        try:
            building.rename(folder)
        except OSError:  # made meanwhile by another bisection: use that one
            shutil.rmtree(building, ignore_errors=True)
            return _kept(folder) or Environment(None, reason=f"{folder} is incomplete")
        python = folder / "bin" / "python"
        return Environment(python, EnvUse(str(folder), kept=False, seconds=seconds), installs)


def _kept(folder: Path) -> Environment | None:
    """A complete environment made before (its mark written), or None."""
    try:
        mark = json.loads((folder / MARK).read_text())
    except (OSError, ValueError):
        return None
    installs = tuple(str(i) for i in mark.get("installs", ()))
    python = folder / "bin" / "python"
    return Environment(python, EnvUse(str(folder), kept=True), installs)


def _pip_install(
    env: Path, requirements: tuple[str, ...], source: PipSource
) -> tuple[str, ...] | str:
    """`pip install` of the set into the venv (pip is this environment's, seen through the
    overlay): what it installed, or pip's reason for not."""
    report = env / "pip-report.json"
    command = [
        str(env / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
        "--no-input", "--quiet", "--report", str(report), *source.options(), *requirements,
    ]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S * 4)
    except subprocess.TimeoutExpired:
        return f"pip took over {PIP_TIMEOUT_S * 4:g} s"
    if done.returncode != 0:
        return pip_error(done.stderr)
    try:
        items = json.loads(report.read_text()).get("install", [])
        return tuple(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in items)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return ()
