"""Pairs of models: a `contaminate_<kind>` model whose `build()` changes process-global
state the way real model code, export helpers and libraries do, and its `victim_<kind>`,
whose graph or verdict that state changes when both run in one process. Run in that order
in one worker, the victim's record must equal its record when run alone (the isolation
tests)."""

from __future__ import annotations

import os
import sys
import types
import warnings
from collections.abc import Callable

import torch

from harness.zoo import ModelSpec

F = torch.nn.functional
_ENV_FLAG = "HARNESS_TEST_ACTIVATION"


def _x() -> tuple[torch.Tensor, ...]:
    return (torch.rand(2, 8),)


class _LinearThen(torch.nn.Module):
    """A linear layer, then `act` looked up at call time (as model code calls F.gelu)."""

    def __init__(self, act: str) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(F, self.act)(self.fc(x))


# -- the contaminators: each changes process state in build(), then is a plain model ----------


def _patch_gelu() -> torch.nn.Module:
    """Model code that "fixes" an activation for the whole process."""
    original = F.gelu
    F.gelu = lambda x, approximate="none": original(x, approximate="tanh")  # type: ignore[assignment]
    return _LinearThen("relu")


def _wrap_export() -> torch.nn.Module:
    """An export helper that pins the opset of every later export."""
    original = torch.onnx.export

    def pinned(*args: object, **kwargs: object) -> object:
        kwargs["opset_version"] = 17
        return original(*args, **kwargs)  # type: ignore[arg-type]

    torch.onnx.export = pinned  # type: ignore[assignment]
    return _LinearThen("relu")


def _default_dtype() -> torch.nn.Module:
    torch.set_default_dtype(torch.float64)
    return _LinearThen("relu").float()


def _flush_denormal() -> torch.nn.Module:
    torch.set_flush_denormal(True)
    return _LinearThen("relu")


def _environ() -> torch.nn.Module:
    os.environ[_ENV_FLAG] = "tanh"
    return _LinearThen("relu")


def _sys_modules() -> torch.nn.Module:
    """A shim module registered under an optional dependency's name."""
    sys.modules["harness_test_optional_dependency"] = types.ModuleType("shim")
    return _LinearThen("relu")


def _custom_symbolic() -> torch.nn.Module:
    """A TorchScript symbolic registered for aten::gelu (as export helpers do)."""

    def relu_instead(g: object, x: object, approximate: str = "none") -> object:
        return g.op("Relu", x)  # type: ignore[attr-defined]

    torch.onnx.register_custom_op_symbolic("aten::gelu", relu_instead, 9)
    return _LinearThen("relu")


def _warnings_as_errors() -> torch.nn.Module:
    warnings.simplefilter("error")
    return _LinearThen("relu")


def _recursion_limit() -> torch.nn.Module:
    sys.setrecursionlimit(150)
    return _LinearThen("relu")


def _global_hook() -> torch.nn.Module:
    """A global forward hook on every module (as profilers and debuggers install)."""
    torch.nn.modules.module.register_module_forward_hook(
        lambda module, args, out: out * 2 if isinstance(out, torch.Tensor) else out
    )
    return _LinearThen("relu")


_LIBRARIES: list[torch.library.Library] = []


def _kernel_override() -> torch.nn.Module:
    """A library that replaces an ATen kernel on the CPU (as vendor extensions do)."""
    library = torch.library.Library("aten", "IMPL")
    library.impl("tanh", lambda x: x.clamp(-1, 1), "CPU")
    _LIBRARIES.append(library)  # the override lives as long as the library object
    return _LinearThen("relu")


# -- the victims -----------------------------------------------------------------------------


class _Denormal(torch.nn.Module):
    """Scales by a denormal constant (1e-39): flushed to zero where flush-denormal is on."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.tensor(1e-39) * 1e30


class _Deprecated(_LinearThen):
    """Model code that warns on every call (as library code about to change a default does)."""

    def __init__(self) -> None:
        super().__init__("relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        warnings.warn(
            "this layer's default changes in the next release", FutureWarning, stacklevel=2
        )
        return super().forward(x)


class _Deep(torch.nn.Module):
    """Forty nested modules: export recursion deeper than a tight recursion limit."""

    def __init__(self, depth: int = 40) -> None:
        super().__init__()
        self.inner = _Deep(depth - 1) if depth > 1 else torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 1


def _from_env() -> torch.nn.Module:
    """Model code that picks its activation from an environment flag."""
    return _LinearThen(os.environ.get(_ENV_FLAG, "relu"))


def _spec(name: str, build: object, **extra: object) -> ModelSpec:
    return ModelSpec(name=name, family="seed", build=build, example_inputs=_x, **extra)  # type: ignore[arg-type]


KINDS = {
    # kind: (contaminator's build, victim's build, extra fields of the victim)
    "gelu": (_patch_gelu, lambda: _LinearThen("gelu"), {}),
    "export": (_wrap_export, lambda: _LinearThen("relu"), {}),
    "dtype": (_default_dtype, lambda: _LinearThen("relu"), {}),
    "denormal": (_flush_denormal, _Denormal, {}),
    "environ": (_environ, _from_env, {}),
    "modules": (_sys_modules, lambda: _LinearThen("relu"), {"requires": ("harness_test_optional_dependency",)}),
    "symbolic": (_custom_symbolic, lambda: _LinearThen("gelu"), {}),
    "warnings": (_warnings_as_errors, _Deprecated, {}),
    "recursion": (_recursion_limit, _Deep, {}),
    "hook": (_global_hook, lambda: _LinearThen("relu"), {}),
    "kernel": (_kernel_override, lambda: _LinearThen("tanh"), {}),
}  # fmt: skip


def _both(contaminate: Callable[[], object], victim: Callable[[], object]) -> Callable[[], object]:
    """The contaminator's state, then the victim, in one build: what the victim met when it
    ran after the contaminator in a shared process (the tests' control)."""
    return lambda: (contaminate(), victim())[1]


SPECS = [
    spec
    for kind, (contaminate, victim, extra) in KINDS.items()
    for spec in (
        _spec(f"contaminate_{kind}", contaminate),
        _spec(f"victim_{kind}", victim, **extra),
        _spec(f"both_{kind}", _both(contaminate, victim), **extra),
    )
]
