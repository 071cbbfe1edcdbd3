"""The tolerance policy (harness/tolerance.py): allowed = K * naive error + floor,
NaN/inf never pass where the reference is finite, non-finite reference entries must
be matched exactly."""
from __future__ import annotations

import math

import pytest
import torch

from harness import tolerance
from harness.tolerance import FLOOR, K, assert_close, compare, floor_for

F64 = torch.float64


def t(*xs, dtype=F64):
    return torch.tensor(xs, dtype=dtype)


def test_identical_passes_with_zero_error():
    ref = t(1.0, -2.0, 3.0)
    cmp = compare(ref.clone(), ref)
    assert cmp.ok and cmp.max_error == 0.0 and cmp.naive_error == 0.0


def test_allowed_is_k_times_naive_plus_floor_scaled_by_reference_magnitude():
    ref = t(0.0, 2.0, -5.0)
    naive = ref + t(0.0, 0.01, 0.0)
    cmp = compare(ref.to(torch.float32), ref, naive)
    assert cmp.naive_error == pytest.approx(0.01)
    assert cmp.allowed == pytest.approx(K * 0.01 + FLOOR[torch.float32] * 5.0)


def test_floor_scale_is_at_least_one():
    ref = t(1e-3, -2e-3)
    cmp = compare(ref.clone(), ref)
    assert cmp.allowed == pytest.approx(FLOOR[F64] * 1.0)


def test_boundary_just_inside_and_just_outside():
    ref = t(0.0, 1.0, 2.0, 3.0)
    naive = ref + t(0.0, 0.0, 1e-3, 0.0)
    allowed = compare(ref, ref, naive).allowed
    inside = ref + t(0.0, 0.0, 0.0, 0.99 * allowed)
    outside = ref + t(0.0, 0.0, 0.0, 1.01 * allowed)
    assert compare(inside, ref, naive).ok
    cmp = compare(outside, ref, naive)
    assert not cmp.ok and cmp.where == (3,) and cmp.max_error == pytest.approx(1.01 * allowed)


def test_without_naive_only_the_floor_applies():
    ref = t(1.0, 1.0)
    cmp = compare(ref + 1e-9, ref)
    assert not cmp.ok  # float64 floor is 1e-10
    assert cmp.allowed == pytest.approx(FLOOR[F64])


def test_floor_follows_the_given_input_dtype():
    ref = t(1.0)
    actual = (ref + 1e-3).to(torch.float32)
    assert not compare(actual, ref).ok  # float32 floor
    assert compare(actual, ref, dtype=torch.float16).ok  # float16 floor 2e-3
    assert compare(actual, ref, dtype=torch.float16).allowed == pytest.approx(FLOOR[torch.float16])


def test_unknown_dtype_floor_falls_back_to_float32():
    assert floor_for(torch.int32) == FLOOR[torch.float32]
    for dt, floor in FLOOR.items():
        assert floor_for(dt) == floor


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_never_passes_where_reference_is_finite(bad):
    ref = t(1.0, 2.0)
    # even with an enormous naive error, NaN/inf does not pass
    naive = t(1e30, -1e30)
    cmp = compare(t(1.0, bad), ref, naive)
    assert not cmp.ok and cmp.where == (1,) and math.isinf(cmp.max_error)
    kind = "NaN" if math.isnan(bad) else "inf"
    assert f"{kind} where the reference is 2" in cmp.reason


def test_nan_in_naive_is_ignored_for_the_yardstick():
    ref = t(1.0, 2.0)
    naive = t(float("nan"), 2.5)
    cmp = compare(ref, ref, naive)
    assert cmp.ok and cmp.naive_error == pytest.approx(0.5)


def test_nan_reference_rows_must_be_matched():
    ref = t(float("nan"), 1.0)
    assert compare(t(float("nan"), 1.0), ref).ok
    cmp = compare(t(0.0, 1.0), ref)
    assert not cmp.ok and cmp.where == (0,) and "where the reference is nan" in cmp.reason


def test_infinite_reference_must_be_matched_exactly():
    ref = t(float("-inf"), 0.0)
    assert compare(t(float("-inf"), 0.0), ref).ok
    assert not compare(t(float("inf"), 0.0), ref).ok
    assert not compare(t(-1e308, 0.0), ref).ok


def test_shape_mismatch_fails_with_reason():
    cmp = compare(torch.zeros(2, 3), torch.zeros(3, 2, dtype=F64))
    assert not cmp.ok and "shape (2, 3) != expected (3, 2)" in cmp.reason


def test_empty_tensors_pass():
    assert compare(torch.zeros(0, 4), torch.zeros(0, 4, dtype=F64)).ok


def test_where_points_at_the_worst_element_in_nd():
    ref = torch.zeros(2, 3, 4, dtype=F64)
    actual = ref.clone()
    actual[1, 2, 0] = 0.5
    actual[0, 1, 1] = 0.1
    cmp = compare(actual, ref)
    assert cmp.where == (1, 2, 0) and cmp.max_error == pytest.approx(0.5)


def test_low_precision_actual_is_compared_in_float64():
    ref = torch.linspace(-3, 3, 50, dtype=F64)
    naive = ref.to(torch.bfloat16)
    assert compare(naive, ref, naive).ok  # the naive computation itself is within K * itself + floor


def test_assert_close_message_names_the_numbers():
    ref = t(1.0, 2.0)
    with pytest.raises(AssertionError) as info:
        assert_close(t(1.0, 2.5), ref, what="my output")
    msg = str(info.value)
    assert msg.startswith("my output differs from the float64 reference: max error 5.000e-01 at index (1,)")
    assert f"= {K:g} x naive same-dtype error" in msg
    assert assert_close(ref, ref).ok


def test_assert_close_reports_nan():
    with pytest.raises(AssertionError, match="NaN where the reference is 1"):
        assert_close(t(float("nan")), t(1.0))


def test_policy_constants_are_sane():
    assert tolerance.K >= 1
    assert FLOOR[F64] < FLOOR[torch.float32] < FLOOR[torch.float16] < FLOOR[torch.bfloat16]


def test_allowance_is_the_budget_compare_uses():
    ref = torch.tensor([1.0, -3.0], dtype=torch.float64)
    naive = torch.tensor([1.001, -3.0], dtype=torch.float32)
    assert tolerance.allowance(ref, naive, dtype=torch.float32) == \
        tolerance.compare(naive, ref, naive, dtype=torch.float32).allowed
    assert tolerance.allowance(ref, dtype=torch.float16) == tolerance.FLOOR[torch.float16] * 3.0


def test_worst_naive_is_the_candidate_with_the_largest_policy_error():
    ref = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    close, far = torch.tensor([1.0, 2.0, 3.001]), torch.tensor([1.01, 2.0, 3.0])
    assert tolerance.worst_naive(ref, [close, far]) is far
    assert tolerance.worst_naive(ref, [far, close]) is far
    # non-finite elements count as the policy counts them: not at all
    broken = torch.tensor([float("nan"), 2.0, 3.0])
    assert tolerance.naive_error(ref, broken) == 0.0 and tolerance.worst_naive(ref, [broken, close]) is close
