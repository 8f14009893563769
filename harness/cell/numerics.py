"""The numerics gate: ONNX Runtime outputs against eager PyTorch (DESIGN.md protocol).

An output passes when allclose(rtol, atol) holds against the float32 reference, or when
its error against the float64 reference is within `NOISE_MULTIPLE` times eager float32's
own error against float64 (eager's noise floor). NaN where eager has none always fails.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harness.store.records import OutputCheck

DEFAULT_TOLERANCE = (1e-4, 1e-5)
NOISE_MULTIPLE = 10.0


def compare_outputs(
    actual: Sequence[np.ndarray],
    reference: Sequence[np.ndarray],
    reference64: Sequence[np.ndarray] | None,
    names: Sequence[str],
    tolerance: tuple[float, float] | None,
) -> list[OutputCheck]:
    rtol, atol = tolerance or DEFAULT_TOLERANCE
    if len(actual) != len(reference):
        return [
            OutputCheck(
                "outputs",
                None,
                None,
                None,
                rtol,
                atol,
                False,
                note=f"ONNX model has {len(actual)} outputs, eager has {len(reference)}",
            )
        ]
    checks = []
    for i, (got, want) in enumerate(zip(actual, reference, strict=True)):
        want64 = reference64[i] if reference64 is not None else None
        name = names[i] if i < len(names) else f"output_{i}"
        checks.append(check_output(name, np.asarray(got), np.asarray(want), want64, rtol, atol))
    return checks


def check_output(
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    want64: np.ndarray | None,
    rtol: float,
    atol: float,
) -> OutputCheck:
    if got.shape != want.shape:
        return OutputCheck(
            name, None, None, None, rtol, atol, False, note=f"shape {got.shape} != {want.shape}"
        )
    if not np.issubdtype(want.dtype, np.floating) and not np.issubdtype(
        want.dtype, np.complexfloating
    ):
        equal = bool(np.array_equal(got, want))
        mismatches = int(np.count_nonzero(got != want))
        return OutputCheck(
            name,
            float(mismatches),
            None,
            None,
            0.0,
            0.0,
            equal,
            note=None if equal else f"{mismatches} of {want.size} values differ",
        )
    got64, want64_32 = got.astype(np.float64), want.astype(np.float64)
    new_nan = bool(np.any(np.isnan(got64) & ~np.isnan(want64_32)))
    diff = np.abs(got64 - want64_32)
    finite = np.isfinite(diff)
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    scale = np.abs(want64_32)
    rel_mask = finite & (scale > atol)
    max_rel = float((diff[rel_mask] / scale[rel_mask]).max()) if rel_mask.any() else 0.0
    rmse = float(np.sqrt(np.mean(diff[finite] ** 2))) if finite.any() else 0.0
    close = bool(np.allclose(got64, want64_32, rtol=rtol, atol=atol, equal_nan=True))
    if new_nan:
        return OutputCheck(
            name, max_abs, max_rel, rmse, rtol, atol, False, note="NaN where eager has none"
        )
    if close:
        return OutputCheck(name, max_abs, max_rel, rmse, rtol, atol, True)
    ok, note = _noise_gate(got64, want64_32, want64)
    return OutputCheck(name, max_abs, max_rel, rmse, rtol, atol, ok, note=note)


def _noise_gate(
    got: np.ndarray, want: np.ndarray, want64: np.ndarray | None
) -> tuple[bool, str | None]:
    """Pass an output that misses allclose only because eager float32 is that noisy too."""
    if want64 is None or want64.shape != want.shape:
        return False, None
    truth = want64.astype(np.float64)
    eager_noise = float(np.nanmax(np.abs(want - truth))) if want.size else 0.0
    onnx_error = float(np.nanmax(np.abs(got - truth))) if got.size else 0.0
    if eager_noise > 0 and onnx_error <= NOISE_MULTIPLE * eager_noise:
        return (
            True,
            f"passed by float64 gate: error {onnx_error:.3g} <= {NOISE_MULTIPLE:g} x eager noise {eager_noise:.3g}",
        )
    return False, f"error vs float64 {onnx_error:.3g}, eager float32 noise {eager_noise:.3g}"
