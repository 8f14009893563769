"""What the manifest says about the software and hardware a run used (no torch import:
versions come from package metadata, hardware from /proc and nvidia-smi)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from harness import __version__

# onnx-ir is onnxscript's IR: its releases alone have broken exports (onnxscript#2790).
PACKAGES = (
    "torch",
    "onnx",
    "onnx-ir",
    "onnxscript",
    "onnxruntime",
    "onnxruntime-gpu",
    "ray",
    "numpy",
)
# The model libraries of the adapters (model_zoo/hf, model_zoo/transformers,
# model_zoo/torchvision): listed where installed, so runs with two versions of them
# (`--variant new=transformers==X`) say which ran where.
MODEL_LIBRARIES = ("transformers", "torchvision")
REPO = Path(__file__).resolve().parents[2]


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in (*PACKAGES, *MODEL_LIBRARIES):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            if name in PACKAGES and name != "onnxruntime-gpu":
                found[name] = None
    # The `gpu` extra's onnxruntime-gpu provides the same `onnxruntime` module.
    found["onnxruntime"] = found["onnxruntime"] or found.get("onnxruntime-gpu")
    return found


def distribution_status(names: tuple[str, ...]) -> dict[str, dict[str, str | None]]:
    """Each distribution's installed `version` (None where absent) and, where installed,
    the first `import_error` of its top-level modules: what `harness bisect` checks in a
    package version's runtime_env before running cells there."""
    modules = importlib.metadata.packages_distributions()
    found: dict[str, dict[str, str | None]] = {}
    for name in names:
        try:
            version: str | None = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = {"version": None, "import_error": f"{name} is not installed"}
            continue
        wanted = _canonical(name)
        tops = sorted(m for m, d in modules.items() if wanted in map(_canonical, d))
        found[name] = {"version": version, "import_error": _import_error(tops)}
    return found


def requested_distributions(variants: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """The distributions the variants' pip requirements name (`onnx-ir==0.1.12` ->
    `onnx-ir`, `dir/onnx_ir-0.1.12-py3-none-any.whl` -> `onnx_ir`: a wheel's or sdist's
    file name starts with its distribution's), pip's options left out."""
    names = set()
    for specs in variants.values():
        for spec in specs:
            if spec.endswith((".whl", ".tar.gz", ".zip")) and "://" not in spec:
                spec = re.split(r"-\d", Path(spec).name, maxsplit=1)[0]
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
            if match and not spec.startswith("-"):
                names.add(match.group(1))
    return tuple(sorted(names))


def with_requested(found: dict[str, Any]) -> dict[str, Any]:
    """A worker's `versions()` with the requested distributions' versions beside them (the
    manifest's flat form: name -> version)."""
    flat = {k: v for k, v in found.items() if k != "distributions"}
    for name, status in (found.get("distributions") or {}).items():
        key = next((k for k in flat if _canonical(k) == _canonical(name)), name)
        flat[key] = status.get("version")
    return flat


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _import_error(modules: list[str]) -> str | None:
    for module in modules:
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as exc:  # a package's import may raise anything
            return f"import {module}: {type(exc).__name__}: {exc}".splitlines()[0][:500]
    return None


ORT_BUILDS = ("onnxruntime", "onnxruntime-gpu")
INSTALL_ORT = 'pip install -e ".[cpu]" (or ".[gpu]" on a machine with CUDA)'


def onnxruntime_missing() -> str | None:
    """Why no `onnxruntime` module can be imported here, if none can (found without
    importing it: this module never imports onnxruntime)."""
    if importlib.util.find_spec("onnxruntime") is not None:
        return None
    installed = [n for n in ORT_BUILDS if _installed(n)]
    if installed:  # a build whose files a second build's uninstall removed
        return f"onnxruntime does not import although {installed[0]} is installed: reinstall it with {INSTALL_ORT}"
    return f"onnxruntime is not installed: install one build of it with {INSTALL_ORT}"


def onnxruntime_clash() -> str | None:
    """Both builds installed: they share one module folder, and the last one installed
    wins (often the CPU-only one, so CUDA cells would fail to get the CUDA provider)."""
    if not all(_installed(n) for n in ORT_BUILDS):
        return None
    return (
        "both onnxruntime and onnxruntime-gpu are installed and overwrite each other's"
        ' files; keep one: pip uninstall -y onnxruntime onnxruntime-gpu && pip install -e ".[gpu]"'
        ' (or ".[cpu]")'
    )


def installed_version(distribution: str) -> str | None:
    """The installed version of `distribution`, or None where it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _installed(distribution: str) -> bool:
    return installed_version(distribution) is not None


def harness_info() -> dict[str, str | None]:
    return {"version": __version__, "git_sha": _git_sha()}


def _git_sha() -> str | None:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


# Of this machine's memory, what its cells may reserve together (the rest: the driver,
# the zygotes, the system).
MEMORY_SHARE = 0.9


def memory_share_gb(slots: int) -> float | None:
    """This machine's memory cells may reserve, shared by `slots` cells at once; None
    where the machine does not say how much it has."""
    machine_gb = _memory_gb()
    return round(float(machine_gb) * MEMORY_SHARE / max(1, slots), 2) if machine_gb else None


def hardware() -> dict[str, Any]:
    cpuinfo = _read("/proc/cpuinfo")
    return {
        "cpu": _cpu_model(cpuinfo),
        "cpu_id": cpu_id(cpuinfo),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "gpus": _gpus(),
        "machine": platform.machine(),
        "system": platform.system(),
    }


def _cpu_model(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


# The instruction sets ORT's and torch's kernels choose between: a host without one runs
# the same graph on other kernels. (BERT-base's graph took 168 ms, then 314 ms four days
# later, on a machine that said "AMD EPYC" both times.)
KERNEL_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni",
                "amx_tile", "sve", "sve2", "asimddp", "i8mm", "bf16")  # fmt: skip


def cpu_id(cpuinfo: str) -> str | None:
    """What tells two CPUs of one brand string apart: x86's family, model and stepping (or
    Arm's implementer and part), and the kernel-choosing instruction sets it has; None
    where /proc/cpuinfo says none of it."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    x86 = "cpu family" in fields
    names = ("cpu family", "model", "stepping") if x86 else ("CPU implementer", "CPU part")
    found = [f"{n.split()[-1]} {fields[n]}" for n in names if fields.get(n)]
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    found += [f for f in KERNEL_FLAGS if f in flags]
    return " ".join(found) or None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _memory_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _gpus() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]
