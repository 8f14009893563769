from __future__ import annotations

import numpy as np

from harness.cell.numerics import check_output, compare_outputs


def test_allclose_pass_reports_errors() -> None:
    want = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    got = want + np.array([0.0, 1e-6, -2e-6], dtype=np.float32)
    c = check_output("y", got, want, None, 1e-4, 1e-5)
    assert c.ok
    assert c.max_abs is not None and abs(c.max_abs - 2e-6) < 1e-7
    assert c.max_rel is not None and abs(c.max_rel - 5e-7) < 1e-7


def test_float64_gate_passes_output_as_noisy_as_eager() -> None:
    truth = np.array([1000.0, -1000.0])
    want = (truth + np.array([0.5, -0.5])).astype(np.float32)  # eager float32 noise 0.5
    got = (truth + np.array([1.0, 1.0])).astype(np.float32)  # error 1.0 vs truth: within 10x
    c = check_output("y", got, want, truth, 1e-6, 1e-6)
    assert c.ok and c.note and "float64 gate" in c.note


def test_float64_gate_fails_output_far_beyond_eager_noise() -> None:
    truth = np.array([1.0, 2.0])
    want = truth.astype(np.float32)
    got = (truth + 0.1).astype(np.float32)
    assert not check_output("y", got, want, truth, 1e-4, 1e-5).ok


def test_new_nan_always_fails() -> None:
    want = np.array([1.0, 2.0], dtype=np.float32)
    got = np.array([1.0, np.nan], dtype=np.float32)
    c = check_output("y", got, want, want.astype(np.float64), 1.0, 1.0)
    assert not c.ok and c.note == "NaN where eager has none"


def test_integer_outputs_compare_exactly() -> None:
    c = check_output("idx", np.array([1, 2, 4]), np.array([1, 2, 3]), None, 1e-4, 1e-5)
    assert not c.ok and c.max_abs == 1.0


def test_output_count_mismatch_is_one_failed_check() -> None:
    checks = compare_outputs([np.zeros(2)], [np.zeros(2), np.zeros(3)], None, ["a"], None)
    assert (
        len(checks) == 1 and not checks[0].ok and "1 outputs, eager has 2" in (checks[0].note or "")
    )


def test_shape_mismatch_fails() -> None:
    c = check_output("y", np.zeros((2, 3)), np.zeros((3, 2)), None, 1e-4, 1e-5)
    assert not c.ok and "shape" in (c.note or "")
