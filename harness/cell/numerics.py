"""The numerics gate: ONNX Runtime outputs against eager PyTorch (docs/design.md, protocol).

Judged element by element. A float element passes when allclose's test holds for it
(|onnx - eager| <= atol + rtol * |eager|), or when its error against the float64
reference is within `NOISE_MULTIPLE` times eager float32's own error on that same element,
plus atol: eager's noise floor, where it is. One large eager error on a big element no
longer lets a large ONNX error pass on a tiny one. Non-finite values must sit where
eager's are, with the same sign (NaN for NaN, +inf for +inf). Integer and bool outputs
must be equal; `mismatches` counts the elements that fail, for every kind of output.
An output whose dtype differs from eager's fails whatever its values (an int32 where eager
gives int64 is not what the user's model returns), with the dtypes in its note. Where no
element could be compared (an empty output, or NaN throughout), the error sizes are None.

A reduced-precision cell (float16, bfloat16) is judged by the same rule with `rounding`
(harness.cell.precision.rounding: a few of the dtype's epsilons): its truth is the float32
model's output instead of float64, and an element also passes where ONNX is within that
rounding of the float32 value (relative to the element and to the output's largest value):
eager at the dtype rounds at every op and ONNX Runtime's CPU provider computes a float16
graph in float32 and rounds once, so the two differ by a few units in the last place where
neither lost precision. An element where eager overflows and ONNX gives the float32 value
is eager's error too. An output passes while at most `MAX_FRACTION` of its elements fail
(`mismatch_fraction`, both in the record).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from harness.cell.precision import is_float
from harness.store.records import Dtype, OutputCheck

DEFAULT_TOLERANCE = (1e-4, 1e-5)
NOISE_MULTIPLE = 10.0
MAX_FRACTION = 0.01  # of a reduced-precision output's elements that may fail


def tolerance_at(dtype: Dtype, entry: tuple[float, float] | None) -> tuple[float, float]:
    """(rtol, atol) a cell at `dtype` is judged by: the entry's (or the default) at float32;
    at a reduced dtype the looser of it and torch's `assert_close` tolerance for the dtype."""
    rtol, atol = entry or DEFAULT_TOLERANCE
    if not dtype.reduced:
        return rtol, atol
    return max(rtol, dtype.tolerance[0]), max(atol, dtype.tolerance[1])


def compare_outputs(
    actual: Sequence[np.ndarray],
    reference: Sequence[np.ndarray],
    reference64: Sequence[np.ndarray] | None,
    names: Sequence[str],
    tolerance: tuple[float, float] | None,
    *,
    rounding: float | None = None,
) -> list[OutputCheck]:
    rtol, atol = tolerance or DEFAULT_TOLERANCE
    if len(actual) != len(reference):
        note = f"ONNX model has {len(actual)} outputs, eager has {len(reference)}"
        return [OutputCheck("outputs", None, None, None, rtol, atol, False, note=note)]
    checks = []
    for i, (got, want) in enumerate(zip(actual, reference, strict=True)):
        want64 = reference64[i] if reference64 is not None else None
        name = names[i] if i < len(names) else f"output_{i}"
        got, want = np.asarray(got), np.asarray(want)
        check = check_output(name, got, want, want64, rtol, atol, rounding=rounding)
        checks.append(_same_dtype(check, got, want))
    return checks


def _same_dtype(check: OutputCheck, got: np.ndarray, want: np.ndarray) -> OutputCheck:
    """A final output must have eager's dtype too (intermediate values, compared by the
    first-divergence search, are judged on their values alone)."""
    if got.dtype == want.dtype:
        return check
    note = f"dtype {got.dtype} where eager gives {want.dtype}"
    return dataclasses.replace(
        check, ok=False, note=f"{note}; {check.note}" if check.note else note
    )


def check_output(
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    want64: np.ndarray | None,
    rtol: float,
    atol: float,
    *,
    rounding: float | None = None,
) -> OutputCheck:
    if got.shape != want.shape:
        note = f"shape {got.shape} != {want.shape}"
        return OutputCheck(name, None, None, None, rtol, atol, False, note=note)
    if not is_float(want):
        return _exact(name, got, want)
    got64, want64_ = got.astype(np.float64), want.astype(np.float64)
    return _floats(name, got64, want64_, want64, rtol, atol, rounding)


def _exact(name: str, got: np.ndarray, want: np.ndarray) -> OutputCheck:
    """Integer and bool outputs: equal, element for element."""
    mismatches = int(np.count_nonzero(got != want))
    max_abs = None
    if want.dtype != np.bool_ and want.size:
        with np.errstate(invalid="ignore"):  # ONNX may give NaN where eager has an integer
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        finite = np.isfinite(diff)
        max_abs = float(diff[finite].max()) if finite.any() else None
    note = None if not mismatches else f"{mismatches} of {want.size} values differ"
    fraction = _fraction(mismatches, want.size)
    return OutputCheck(
        name, max_abs, None, None, 0.0, 0.0, not mismatches, note, mismatches, fraction
    )


def _fraction(mismatches: int, size: int) -> float | None:
    return mismatches / size if size else None


def _floats(
    name: str,
    got: np.ndarray,
    want: np.ndarray,
    want64: np.ndarray | None,
    rtol: float,
    atol: float,
    rounding: float | None = None,
) -> OutputCheck:
    finite = np.isfinite(got) & np.isfinite(want)
    misplaced = _nonfinite_misplaced(got, want)
    rounded = _within_rounding(got, want64, rounding)
    misplaced &= ~(rounded & ~np.isfinite(want))  # eager overflowed, ONNX did not
    with np.errstate(invalid="ignore"):  # inf - inf; those elements are judged apart
        diff = np.where(finite, np.abs(got - want), 0.0)
    close = finite & (diff <= atol + rtol * np.abs(want))
    noise = _within_eager_noise(got, want, want64, atol) | rounded
    noisy = finite & ~close & noise
    bad = finite & ~close & ~noisy
    mismatches = int(np.count_nonzero(bad) + np.count_nonzero(misplaced))
    fraction = _fraction(mismatches, want.size)
    reduced = rounding is not None
    ok = not mismatches or (reduced and fraction is not None and fraction <= MAX_FRACTION)
    truth = "float32" if reduced else "float64"
    counts = int(np.count_nonzero(misplaced)), int(np.count_nonzero(noisy))
    note = _float_note(*counts, bad, got, want, want64, truth)
    max_abs, max_rel, rmse = _error_sizes(diff, want, finite, atol)
    return OutputCheck(name, max_abs, max_rel, rmse, rtol, atol, ok, note, mismatches, fraction)


def _within_rounding(
    got: np.ndarray, truth: np.ndarray | None, rounding: float | None
) -> np.ndarray:
    """Elements within a reduced dtype's `rounding` of the float32 model's value, relative
    to the element and to the output's largest finite value."""
    if rounding is None or truth is None or truth.shape != got.shape:
        return np.zeros(got.shape, dtype=bool)
    t = truth.astype(np.float64)
    scale = largest_finite(t) or 0.0
    with np.errstate(invalid="ignore"):
        near = np.abs(got - t) <= rounding * (np.abs(t) + scale)
    found: np.ndarray = np.isfinite(got) & np.isfinite(t) & near
    return found


def largest_finite(a: np.ndarray) -> float | None:
    """The largest magnitude among `a`'s finite values (None: there are none)."""
    finite = np.abs(a[np.isfinite(a)])
    return float(finite.max()) if finite.size else None


def _nonfinite_misplaced(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elements where ONNX and eager disagree on NaN, +inf or -inf."""
    misplaced: np.ndarray = (
        (np.isnan(got) != np.isnan(want))
        | (np.isposinf(got) != np.isposinf(want))
        | (np.isneginf(got) != np.isneginf(want))
    )
    return misplaced


def _within_eager_noise(
    got: np.ndarray, want: np.ndarray, want64: np.ndarray | None, atol: float
) -> np.ndarray:
    """Per element: |onnx - float64| <= k * |eager - float64| + atol."""
    if want64 is None or want64.shape != want.shape:
        return np.zeros(want.shape, dtype=bool)
    truth = want64.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.abs(got - truth) <= NOISE_MULTIPLE * np.abs(want - truth) + atol


def _error_sizes(
    diff: np.ndarray, want: np.ndarray, finite: np.ndarray, atol: float
) -> tuple[float | None, float | None, float | None]:
    """max_abs, max_rel, rmse over the elements finite on both sides; None where there
    are none (an empty output, NaN throughout): nothing was compared, which is not 0."""
    if not finite.any():
        return None, None, None
    scale = np.abs(want)
    rel = finite & (scale > atol)
    max_rel = float((diff[rel] / scale[rel]).max()) if rel.any() else None
    return float(diff[finite].max()), max_rel, float(np.sqrt(np.mean(diff[finite] ** 2)))


def _float_note(
    misplaced: int,
    noisy: int,
    bad: np.ndarray,
    got: np.ndarray,
    want: np.ndarray,
    want64: np.ndarray | None,
    truth: str = "float64",
) -> str | None:
    parts = []
    if misplaced:
        parts.append(f"{misplaced} NaN/inf values where eager has none or another")
    if bad.any():
        parts.append(f"{int(np.count_nonzero(bad))} of {want.size} values beyond tolerance")
        if want64 is not None:
            i = int(np.argmax(np.where(bad, np.abs(got - want), -1.0)))
            flat64 = want64.astype(np.float64).reshape(-1)
            onnx_err = abs(got.reshape(-1)[i] - flat64[i])
            eager_err = abs(want.reshape(-1)[i] - flat64[i])
            parts.append(f"worst: error vs {truth} {onnx_err:.3g}, eager's {eager_err:.3g}")
    elif noisy:
        parts.append(
            f"passed by {truth} gate: {noisy} values within {NOISE_MULTIPLE:g} x eager noise"
        )
    return "; ".join(parts) or None
