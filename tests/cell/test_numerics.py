"""The numerics gate, element by element, with hand-computed numbers."""

from __future__ import annotations

import numpy as np
import pytest

from harness.cell.numerics import check_output, compare_outputs
from harness.store.records import Record

INF, NAN = float("inf"), float("nan")


def test_allclose_pass_reports_errors() -> None:
    want = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    got = want + np.array([0.0, 1e-6, -2e-6], dtype=np.float32)
    c = check_output("y", got, want, None, 1e-4, 1e-5)
    assert c.ok and c.mismatches == 0
    assert c.max_abs is not None and abs(c.max_abs - 2e-6) < 1e-7
    assert c.max_rel is not None and abs(c.max_rel - 5e-7) < 1e-7


def test_an_element_passes_within_eager_noise_on_that_element() -> None:
    # eager float32 is 0.5 off on this element; ONNX is 3.0 off: 3.0 <= 10 x 0.5 + 1e-6
    truth = np.array([1000.0])
    c = check_output("y", np.array([1003.0]), np.array([1000.5]), truth, 1e-6, 1e-6)
    assert c.ok and c.mismatches == 0
    assert c.note == "passed by float64 gate: 1 values within 10 x eager noise"


def test_a_big_eager_error_elsewhere_does_not_excuse_a_tiny_element() -> None:
    # The old gate compared tensor-wide maxima: eager noise max 0.5, ONNX error max 1.0,
    # within 10 x, so it passed. Per element, the second value is 0.01 off where eager is
    # exact (its noise is 0): 0.01 > 10 x 0 + 1e-6, and allclose fails too.
    truth = np.array([1000.0, 0.001])
    want = np.array([1000.5, 0.001])
    got = np.array([1001.0, 0.011])
    c = check_output("y", got, want, truth, 1e-6, 1e-6)
    assert not c.ok and c.mismatches == 1
    assert c.note == "1 of 2 values beyond tolerance; worst: error vs float64 0.01, eager's 0"


def test_far_beyond_eager_noise_fails() -> None:
    truth = np.array([1.0, 2.0])
    got = (truth + 0.1).astype(np.float32)
    c = check_output("y", got, truth.astype(np.float32), truth, 1e-4, 1e-5)
    assert not c.ok and c.mismatches == 2


def test_integers_are_exact_with_the_count_in_its_own_field() -> None:
    c = check_output("idx", np.array([1, 5, 3, 9]), np.array([1, 2, 3, 4]), None, 1e-4, 1e-5)
    assert not c.ok and c.mismatches == 2 and c.max_abs == 5.0  # |9 - 4|, not a count
    assert c.note == "2 of 4 values differ"
    same = check_output("idx", np.array([7, 8]), np.array([7, 8]), None, 1e-4, 1e-5)
    assert same.ok and same.mismatches == 0 and same.max_abs == 0.0


def test_nan_where_eager_gives_integers_is_a_mismatch_and_max_abs_stays_finite() -> None:
    got = np.array([0.0, np.nan, 7.0, np.nan])  # ONNX gave floats with NaN for an int64 output
    c = check_output("n", got, np.array([0, 1, 2, 3]), None, 1e-4, 1e-5)
    assert not c.ok and c.mismatches == 3 and c.max_abs == 5.0  # over the finite differences
    nothing = check_output("n", np.array([np.nan]), np.array([1]), None, 1e-4, 1e-5)
    assert nothing.mismatches == 1 and nothing.max_abs is None


def test_bools_are_exact() -> None:
    c = check_output("m", np.array([True, False, True]), np.array([True, True, True]), None, 0, 0)
    assert not c.ok and c.mismatches == 1 and c.max_abs is None


def test_nan_and_inf_must_sit_where_eager_has_them_with_the_same_sign() -> None:
    want = np.array([INF, -INF, NAN, 1.0])
    assert check_output("y", want.copy(), want, None, 1e-4, 1e-5).ok
    cases = {
        "sign": np.array([-INF, -INF, NAN, 1.0]),
        "nan replaced": np.array([INF, -INF, 0.0, 1.0]),
        "new nan": np.array([INF, -INF, NAN, NAN]),
        "inf dropped": np.array([5.0, -INF, NAN, 1.0]),
    }
    for what, got in cases.items():
        c = check_output("y", got, want, None, 1.0, 1.0)
        assert not c.ok and c.mismatches == 1, what
        assert c.note == "1 NaN/inf values where eager has none or another", what
        # over the elements finite in both; "new nan" leaves none of them: nothing compared
        assert c.max_abs == (None if what == "new nan" else 0.0), what


def test_output_count_mismatch_is_one_failed_check() -> None:
    checks = compare_outputs([np.zeros(2)], [np.zeros(2), np.zeros(3)], None, ["a"], None)
    assert len(checks) == 1 and not checks[0].ok
    assert checks[0].note == "ONNX model has 1 outputs, eager has 2"


def test_shape_mismatch_fails() -> None:
    c = check_output("y", np.zeros((2, 3)), np.zeros((3, 2)), None, 1e-4, 1e-5)
    assert not c.ok and c.note == "shape (2, 3) != (3, 2)"


def test_schema_1_records_move_the_integer_mismatch_count_out_of_max_abs() -> None:
    old = {
        "schema": 1, "run_id": "r", "model": "m", "family": "f", "exporter": "dynamo",
        "opset": 18, "device": "cpu", "dynamic": False, "variant": "base", "status": "ok",
        "numerics": [
            {"name": "idx", "max_abs": 3.0, "max_rel": None, "rmse": None, "rtol": 0.0,
             "atol": 0.0, "ok": False, "note": "3 of 8 values differ"},
            {"name": "y", "max_abs": 0.5, "max_rel": 0.1, "rmse": 0.2, "rtol": 1e-4,
             "atol": 1e-5, "ok": True},
        ],
    }  # fmt: skip
    idx, y = Record.from_dict(old).numerics.checks or []
    assert (idx.mismatches, idx.max_abs) == (3, None)
    assert (y.mismatches, y.max_abs) == (None, 0.5)


def test_nothing_compared_is_no_error_size_not_zero() -> None:
    """NaN throughout on both sides, or no element at all: max_abs used to read 0.0."""
    nan = check_output("y", np.full(3, NAN), np.full(3, NAN), None, 1e-4, 1e-5)
    empty = check_output("y", np.zeros((2, 0)), np.zeros((2, 0)), None, 1e-4, 1e-5)
    for c in (nan, empty):
        assert c.ok and c.mismatches == 0
        assert (c.max_abs, c.max_rel, c.rmse) == (None, None, None)
    zeros = check_output("y", np.zeros(3), np.zeros(3), None, 1e-4, 1e-5)
    assert (zeros.max_abs, zeros.rmse, zeros.max_rel) == (0.0, 0.0, None)  # no element > atol


@pytest.mark.parametrize(
    ("got", "want", "note"),
    [
        (np.array([1, 2], np.int32), np.array([1, 2], np.int64), "dtype int32 where eager gives int64"),
        (np.array([0.5], np.float64), np.array([0.5], np.float32), "dtype float64 where eager gives float32"),
        (np.array([1, 0], np.uint8), np.array([True, False]), "dtype uint8 where eager gives bool"),
    ],
)  # fmt: skip
def test_an_output_of_another_dtype_fails_with_its_own_reason(
    got: np.ndarray, want: np.ndarray, note: str
) -> None:
    """Values compared after a cast used to pass: int32 for int64, float64 for float32."""
    (c,) = compare_outputs([got], [want], None, ["y"], None)
    assert not c.ok and c.note == note
    assert c.mismatches == 0  # the values themselves agree


def test_a_dtype_difference_keeps_the_values_note() -> None:
    (c,) = compare_outputs([np.array([1, 5], np.int32)], [np.array([1, 2])], None, ["y"], None)
    assert c.note == "dtype int32 where eager gives int64; 1 of 2 values differ"


def test_a_sampled_cells_error_names_a_dtype_difference_as_such() -> None:
    from harness.runtime.pipeline import mismatch_text

    (c,) = compare_outputs([np.array([1], np.int32)], [np.array([1])], None, ["y"], None)
    assert mismatch_text([c], 2).splitlines()[0] == "1 of 2 outputs differ: dtype differs"
