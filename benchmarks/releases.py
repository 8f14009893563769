"""Environments of real torch releases for the channel and bisect benchmarks: a release's own
environment (torch with the onnx, onnxscript and onnxruntime it was installed with) overlaid
on this one (the harness, ray, pydantic), made once and kept: `harness bisect`'s
environments (harness/bisect/environments.py, `--environments`), used here for plain
`harness run`s too (benchmarks/test_channels_releases.py).

The release environments are plain venvs, one a torch version (`torch-2.13.0`, ...), under
HARNESS_RELEASE_ENVS (default /work/envs: the 2-core development machine's); made with
`python -m venv DIR && DIR/bin/pip install torch==V --index-url .../whl/cpu onnxscript
onnxruntime`. A version without one is named and skipped, as `harness bisect` skips a
version pip cannot install."""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from harness.bisect.environments import Environments
from harness.bisect.index import PipSource

ENVS = Path(os.environ.get("HARNESS_RELEASE_ENVS", "/work/envs"))


@dataclass(frozen=True)
class Release:
    """A release's environment overlaid on this one, or why there is none."""

    name: str  # torch-2.13.0, torch-2.13.0-onnxscript-0.6.2
    python: Path | None
    why_not: str = ""
    seconds: float = 0.0  # making the overlay (0 when it was kept from before)


def requirements(name: str) -> tuple[str, ...]:
    """`torch-2.13.0-onnxscript-0.6.2` -> `torch==2.13.0`, `onnxscript==0.6.2`."""
    return tuple(f"{p}=={v}" for p, v in re.findall(r"([a-z][a-z0-9_.-]*?)-(\d[^-]*)(?:-|$)", name))


def overlay(name: str, root: Path) -> Release:
    """The release `name`'s overlay under `root` (made once, then kept)."""
    env = Environments(root, PipSource(), premade=ENVS).get(requirements(name))
    if env.python is None:
        return Release(name, None, str(env.reason))
    return Release(name, env.python, seconds=env.use.seconds if env.use else 0.0)


def versions(python: Path) -> dict[str, str]:
    """The versions an overlay imports (what a run there will record)."""
    code = (
        "import json, torch, onnx, onnxscript, onnxruntime; print(json.dumps({m.__name__: "
        "m.__version__ for m in (torch, onnx, onnxscript, onnxruntime)}))"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    import json

    return dict(json.loads(done.stdout))


def harness_in(python: Path, *args: str, timeout: float = 3600) -> tuple[int, float, str]:
    """`harness ARGS` with the overlay's Python: exit code, seconds, the tail of stderr."""
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return done.returncode, time.perf_counter() - start, done.stderr[-2000:]
