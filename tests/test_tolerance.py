"""The tolerance policy (harness/spec/tolerance.py): allowed = K * naive error + floor,
NaN/inf never pass where the reference is finite, non-finite reference entries must
be matched exactly."""
from __future__ import annotations

import math

import pytest
import torch

from harness.spec import tolerance
from harness.spec.tolerance import FLOOR, K, assert_close, compare, floor_for

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


# --- the cancellation term: C_TERMS * u(dtype) * terms, elementwise -------------------------------------------


def test_unit_roundoff_is_half_the_machine_epsilon():
    assert tolerance.unit_roundoff(torch.float32) == 2.0 ** -24
    assert tolerance.unit_roundoff(torch.float16) == 2.0 ** -11
    assert tolerance.unit_roundoff(torch.bfloat16) == 2.0 ** -8
    assert tolerance.unit_roundoff(torch.int64) == 2.0 ** -24


def test_terms_allow_rounding_of_the_terms_where_the_result_cancels():
    """A result that is 0 in exact math but formed from terms of size 1000 (one key's dk, a
    one-element LayerNorm's dweight): a few ulps of the terms pass, the floor alone would not."""
    ref = t(0.0, 5.0)
    terms = t(1000.0, 5.0)
    u = tolerance.unit_roundoff(torch.float32)
    actual = ref + t(0.9 * tolerance.C_TERMS * u * 1000.0, 0.0)
    assert not compare(actual, ref, dtype=torch.float32).ok
    cmp = compare(actual, ref, dtype=torch.float32, terms=terms)
    assert cmp.ok and cmp.where == (0,)
    assert cmp.allowed == pytest.approx(FLOOR[torch.float32] * 5.0 + tolerance.C_TERMS * u * 1000.0)
    assert cmp.terms_allowed == pytest.approx(tolerance.C_TERMS * u * 1000.0)


def test_terms_are_elementwise_a_wrong_value_beside_small_terms_fails():
    ref = t(0.0, 0.0)
    terms = t(1e6, 1.0)
    u = tolerance.unit_roundoff(torch.float32)
    bad = t(0.0, 1e-3)  # far beyond what element 1's own terms allow, within element 0's
    cmp = compare(bad, ref, dtype=torch.float32, terms=terms)
    assert not cmp.ok and cmp.where == (1,) and cmp.margin > 1
    assert cmp.allowed == pytest.approx(FLOOR[torch.float32] + tolerance.C_TERMS * u)
    assert "the magnitude of its terms" in cmp.describe()


def test_terms_broadcast_and_non_finite_terms_add_nothing():
    ref = torch.zeros(2, 3, dtype=F64)
    cmp = compare(ref + 3e-3, ref, dtype=torch.float16, terms=torch.full((3,), float("inf"), dtype=F64))
    assert not cmp.ok and cmp.terms_allowed == 0.0  # an inf magnitude is no licence
    assert compare(ref + 3e-3, ref, dtype=torch.float16, terms=torch.tensor([4.0], dtype=F64)).ok


def test_terms_dtype_sets_the_roundoff_of_the_terms():
    ref, terms = t(0.0), t(100.0)
    actual = ref + 1e-2  # 100 u(float16) = 0.05 would allow it; float32's u does not
    assert compare(actual, ref, dtype=torch.float16, terms=terms).ok
    assert not compare(actual, ref, dtype=torch.float16, terms=terms, terms_dtype=torch.float32).ok


def test_allowance_adds_the_largest_terms():
    ref = t(0.0, 1.0)
    u = tolerance.unit_roundoff(torch.float32)
    assert tolerance.allowance(ref, dtype=torch.float32, terms=t(10.0, 300.0)) == pytest.approx(
        FLOOR[torch.float32] + tolerance.C_TERMS * u * 300.0)


def test_margin_is_error_over_allowed():
    ref = t(0.0, 1.0)
    assert compare(ref, ref).margin == 0.0
    cmp = compare(ref + t(0.0, 3e-10), ref)
    assert cmp.margin == pytest.approx(3.0)
    assert compare(t(float("nan"), 1.0), ref).margin == float("inf")


#: The planted gradient bugs whose property compares with this policy, replayed at one fixed
#: configuration per dtype (tests/grad_margins.py): their margin (error / allowed; > 1 = caught)
#: without the cancellation term (C_TERMS = 0) -> with it, as measured when the term was added:
#:
#:   bug                                  float32            float16          bfloat16
#:   attn_dq_without_scale           6.7e5 -> 5.8e5       530 -> 262       30.4 -> 20.3
#:   attn_dk_without_scale           4.9e4 -> 4.6e4      10.8 -> 9.5       1.29 -> 1.13
#:   attn_softmax_no_rowsum          3.9e5 -> 3.3e5       163 -> 97        18.3 -> 11.4
#:   attn_float_mask_ignored_in_bw   3.5e5 -> 3.1e5       164 -> 111       26.2 -> 16.3
#:   attn_gqa_first_head_only        1.4e5 -> 1.0e5      53.1 -> 24.4      7.17 -> 3.15
#:   window_dv_ignores_window        3.3e5 -> 3.2e5       164 -> 156       15.7 -> 15.1
#:   ln_dweight_unnormalized         4.1e5 -> 3.5e5       184 -> 113       32.2 -> 17.1
#:   ln_no_mean_term                 1.6e5 -> 9.2e4       106 -> 20.8      12.1 -> 2.56
#:   rms_constant_rms                8.0e4 -> 7.9e4      37.7 -> 35.6         4 -> 3.81
#:
#: The rest of the planted gradient bugs are caught by exact checks (a masked key's dk = 0),
#: gradcheck in float64 or the determinism convention, which the term does not enter.
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("case", range(9))
def test_planted_gradient_bugs_keep_a_margin_above_one(case, dtype):
    import grad_margins

    bug, check, make = grad_margins.CASES[case]
    m = grad_margins.margin(bug, check, make(dtype))
    assert m > 1, f"{bug} at {dtype}: margin {m:.3g} (error / allowed) under C_TERMS = {tolerance.C_TERMS}"
