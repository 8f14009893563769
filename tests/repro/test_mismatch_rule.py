"""The mismatch scripts' rule is the cell's (harness.cell.numerics): the `mismatch` function
both kinds of repro_min.py carry, run on the values the cell's tests judge, agrees with
check_output element by element. No export: the text is run as the script runs it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from harness.cell.numerics import check_output
from harness.repro import script

F, NAN, INF = np.float32, np.nan, np.inf
RULE_CASES = [  # got, want, want64 (None: no float64 run), rtol, atol
    ([1.0, 2.0], [1.0, 2.0], [1.0, 2.0], 1e-4, 1e-5),
    ([1.00005], [1.0], [1.0], 1e-4, 1e-5),  # within rtol
    ([1.005], [1.001], [1.0], 1e-4, 1e-5),  # within 10x eager's own error against float64
    ([1.02], [1.001], [1.0], 1e-4, 1e-5),  # beyond it
    ([1.005], [1.001], None, 1e-4, 1e-5),  # no float64 run: no noise floor
    ([NAN, INF, -INF], [NAN, INF, -INF], [NAN, INF, -INF], 1e-4, 1e-5),
    ([NAN], [1.0], [1.0], 1e-4, 1e-5),
    ([1.0], [NAN], [NAN], 1e-4, 1e-5),
    ([-INF], [INF], [INF], 1e-4, 1e-5),
    ([3e38], [INF], [3e38], 1e-4, 1e-5),  # eager overflows: ONNX's finite value is not eager's
    ([1.0, 2.0], [[1.0, 2.0]], [[1.0, 2.0]], 1e-4, 1e-5),  # another shape
]


@pytest.mark.parametrize(("got", "want", "want64", "rtol", "atol"), RULE_CASES)
def test_the_scripts_rule_is_the_cells_for_floats(
    got: list[float], want: list[float], want64: list[float] | None, rtol: float, atol: float
) -> None:
    g, w = np.array(got, F), np.array(want, F)
    w64 = None if want64 is None else np.array(want64, np.float64)
    cell = check_output("n", g, w, w64, rtol, atol).ok
    assert (_mismatch(g, w, w64, rtol, atol) is None) == cell


@pytest.mark.parametrize(
    ("got", "want", "ok"),
    [
        (np.array([1_000_000, 7]), np.array([1_000_001, 7]), False),  # rtol does not apply
        (np.array([3, 7], np.int32), np.array([3, 7]), True),
        (np.array([True, False]), np.array([True, True]), False),
    ],
)
def test_the_scripts_rule_wants_integers_and_bools_equal(
    got: np.ndarray, want: np.ndarray, ok: bool
) -> None:
    assert check_output("n", got, want, None, 1e-4, 1e-5).ok is ok
    assert (_mismatch(got, want, want.astype(np.float64), 1e-4, 1e-5) is None) is ok


def _mismatch(
    got: np.ndarray, want: np.ndarray, want64: np.ndarray | None, rtol: float, atol: float
) -> str | None:
    """The script's own `mismatch`, run as the script runs it (want64 = want without a
    float64 run)."""
    namespace: dict[str, Any] = {"torch": torch, "RTOL": rtol, "ATOL": atol}
    exec(script.MISMATCH, namespace)
    w = torch.from_numpy(want)
    w64 = w if want64 is None else torch.from_numpy(want64)
    found: str | None = namespace["mismatch"](torch.from_numpy(got), w, w64)
    return found
