"""The attention suites catch real bugs: each planted-bug target fails exactly the
property meant to catch it, with the property's name and a repro line.

Every target in ``tests/planted/attention/`` has one bug (its docstring says which,
and which public bug it mimics) on top of the correct ``_base.py``. Each case runs
ONE suite test in-process (``-k``) under the derandomized ``ci`` profile, so the
outcome is the same on every run. Controls: ``reference``, ``torch.nn.functional``
and the planted base itself pass everything; the declared-convention variants pass.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from planted_support import assert_caught, assert_declared_passes, conformance, run_suite, suite_file

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "attention"
ATTENTION_SUITES = ["test_attention.py", "test_attention_masks.py", "test_attention_dropout.py",
                    "test_sliding_window.py"]

#: (planted target, the one suite test that must fail for it)
BUGS = [
    ("gqa_repeat_not_interleave.py", "test_gqa"),
    ("causal_off_by_one.py", "test_causal"),
    ("causal_bottom_right.py", "test_causal"),
    ("finite_mask_constant.py", "test_bool_mask"),
    ("unstable_softmax.py", "test_numerical_range"),
    ("ignored_scale.py", "test_scale"),
    ("scale_one_over_e.py", "test_scale"),
    ("scale_from_ev.py", "test_scale"),
    ("mask_first_batch_item.py", "test_bool_mask"),
    ("tile_remainder_dropped.py", "test_agreement"),
    ("online_softmax_no_rescale.py", "test_permutation"),
    ("softmax_wrong_dim.py", "test_convex_combination"),
    ("bool_mask_inverted.py", "test_bool_mask"),
    ("float_mask_as_bool.py", "test_float_mask"),
    ("float_mask_ignored.py", "test_float_mask"),
    ("dropout_always_on.py", "test_dropout_zero"),
    ("heads_mixed_by_view.py", "test_multi_head"),
    ("inplace_query_scale.py", "test_agreement"),
    ("output_float32.py", "test_agreement"),
    ("fully_masked_rows_unmasked.py", "test_fully_masked_rows"),
    ("window_w_plus_one.py", "test_window_extent"),
    ("window_skipped_when_long.py", "test_window_extent"),
    ("window_not_causal.py", "test_window_extent"),
    ("window_kv_misaligned.py", "test_window_agreement"),
    ("window_finite_mask.py", "test_outside_window"),
    # dropout (issue 11): each bug is caught by the property that names it
    ("dropout_no_rescale.py", "test_dropout_scaling"),
    ("dropout_p_ignored.py", "test_dropout_keep_rate"),
    ("dropout_on_output.py", "test_dropout_on_weights"),
    ("dropout_on_values.py", "test_dropout_fresh_masks"),
    ("dropout_own_generator.py", "test_dropout_seeded"),
    ("dropout_generator_undeclared.py", "test_dropout_seeded"),
    # the tile-boundary regime: each is right below its boundary and wrong above it
    ("causal_leak_past_128.py", "test_causal"),
    ("gqa_modulo_large_groups.py", "test_gqa"),
    ("head_dim_truncated_128.py", "test_agreement"),
    ("online_softmax_no_rescale_past_256.py", "test_agreement"),
    ("last_query_tile_dropped.py", "test_agreement"),
    ("window_masked_by_tile_past_128.py", "test_window_extent"),
    # mask shapes, memory layouts, autocast
    ("key_padding_on_query_axis.py", "test_mask_shapes"),
    ("output_aliases_value.py", "test_layouts"),
    ("strides_ignored.py", "test_layouts"),
    ("autocast_inplace_accumulator.py", "test_autocast"),
]

#: what the failure must say besides the property name, where the bug calls for it
MESSAGES = {
    "causal_off_by_one.py": ["convention mismatch", "matches no known convention"],
    "causal_bottom_right.py": ["convention mismatch", "bottom_right", "HARNESS_CONVENTIONS"],
    "finite_mask_constant.py": ["changed the output"],
    "unstable_softmax.py": ["NaN where the reference is"],
    "online_softmax_no_rescale.py": ["keys and values permuted together"],
    "softmax_wrong_dim.py": ["not a convex combination"],
    # torch's global RNG is not Hypothesis's: either half of the check may fire
    "dropout_always_on.py": ["dropout_p=0.0"],
    "heads_mixed_by_view.py": ["differs from attention on head"],
    "gqa_repeat_not_interleave.py": ["repeat_interleave", "read KV head"],
    "gqa_modulo_large_groups.py": ["read KV head"],
    "inplace_query_scale.py": ["implementation error", "modified its input in place"],
    "output_float32.py": ["implementation error", "returned dtype torch.float32"],
    "fully_masked_rows_unmasked.py": ["fully_masked_rows: the behaviour matches no known convention"],
    "window_w_plus_one.py": ["window_extent: the code follows w+1"],
    "window_skipped_when_long.py": ["matches no known convention"],
    "window_not_causal.py": ["matches no known convention"],
    "window_finite_mask.py": ["lie outside every window"],
    "dropout_no_rescale.py": ["kept weights must be 1/(1-p)"],
    "dropout_p_ignored.py": ["dropout_p is ignored"],
    "dropout_on_output.py": ["acts on the output or on the values"],
    "dropout_on_values.py": ["dropout acts on the values"],
    "dropout_own_generator.py": ["torch.manual_seed", "matches no known convention"],
    "dropout_generator_undeclared.py": ["convention mismatch", "dropout_rng: the code follows generator",
                                        "HARNESS_CONVENTIONS"],
    "key_padding_on_query_axis.py": ["(B, 1, 1, S) key padding"],
    "output_aliases_value.py": ["shares the memory of its argument 2"],
    "strides_ignored.py": ["strides"],
    "autocast_inplace_accumulator.py": ["implementation error"],
}

#: (target declaring a convention, suite file, tests that must pass, label recorded)
DECLARED = [
    ("causal_bottom_right_declared.py", "test_attention_masks.py", ["test_causal"],
     {"attention.causal": "convention:bottom_right"}),
    ("window_w_plus_one_declared.py", "test_sliding_window.py",
     ["test_window_extent", "test_window_agreement", "test_outside_window"],
     {"sliding_window.window_extent": "convention:w+1"}),
    ("dropout_generator_declared.py", "test_attention_dropout.py",
     ["test_dropout_seeded", "test_dropout_keep_rate", "test_dropout_fresh_masks"],
     {"attention.dropout_seeded": "convention:generator"}),
]


def _suite_source(name: str) -> str:
    return suite_file(name).read_text()


def suite_of(test: str) -> Path:
    """The attention suite file that defines ``test``."""
    hits = [suite_file(f) for f in ATTENTION_SUITES if re.search(rf"^def {test}\(", _suite_source(f), re.M)]
    assert len(hits) == 1, f"{test} is defined in {hits}, expected exactly one attention suite"
    return hits[0]


def property_of(test: str) -> str:
    family = re.search(r'^PROPERTY_PREFIX = "([^"]+)"', suite_of(test).read_text(), re.M).group(1)
    return f"{family}.{test.removeprefix('test_')}"


def test_table_is_consistent():
    """Every planted file is in the table (or is a declared variant), and vice versa."""
    files = {p.name for p in PLANTED.glob("*.py") if not p.name.startswith(("_", "history_"))}  # (test_planted_history.py)
    listed = {b for b, _ in BUGS} | {d[0] for d in DECLARED}
    assert files == listed, f"unlisted: {sorted(files - listed)}; missing: {sorted(listed - files)}"
    assert len(BUGS) >= 16
    for bug, test in BUGS:
        suite_of(test)  # the test exists in exactly one suite
        doc = (PLANTED / bug).read_text()
        assert doc.startswith('"""Planted bug'), f"{bug}: module docstring must describe the bug"
        assert "Real pattern" in doc and "Caught by" in doc, f"{bug}: docstring lacks the real pattern"
    # every attention / sliding-window property has at least one planted bug that it catches
    properties = {property_of(m.group(1)) for f in ATTENTION_SUITES
                  for m in re.finditer(r"^def (test_\w+)\(", _suite_source(f), re.M)}
    covered = {property_of(t) for _, t in BUGS}
    assert properties <= covered, f"properties without a planted bug: {sorted(properties - covered)}"


@pytest.mark.parametrize("bug,test", BUGS, ids=[b.removesuffix(".py") for b, _ in BUGS])
def test_planted_bug_is_caught(pytester, bug, test):
    assert_caught(pytester, suite_of(test), PLANTED / bug, test, MESSAGES.get(bug, []))


# (``target`` is the harness plug-in's parameter name, hence ``planted``)
@pytest.mark.parametrize("planted,suite,tests,labels", DECLARED, ids=[d[0].removesuffix(".py") for d in DECLARED])
def test_declared_convention_passes(pytester, tmp_path, planted, suite, tests, labels):
    assert_declared_passes(pytester, tmp_path / "report", suite, PLANTED / planted, tests, labels)


def test_convention_on_the_command_line_passes(pytester):
    """The undeclared w+1 window passes once ``--convention window_extent=w+1`` is given."""
    result = run_suite(pytester, [suite_file("test_sliding_window.py")], [PLANTED / "window_w_plus_one.py"],
                       "test_window_extent", "--convention", "window_extent=w+1")
    result.assert_outcomes(passed=1)


def test_correct_targets_pass_everything(pytester, tmp_path):
    """reference, torch.nn.functional and the planted base pass every attention and
    sliding-window property; torch lacks sliding_window_attention and skips it by name."""
    report = tmp_path / "report"
    impls = ["reference", "torch.nn.functional", PLANTED / "_base.py"]
    result = run_suite(pytester, [suite_file(f) for f in ATTENTION_SUITES], impls, None,
                       "--conformance-report", str(report), "-rs")
    n = {f: len(re.findall(r"^def test_\w+\(", _suite_source(f), re.M)) for f in ATTENTION_SUITES}
    n_swa = n["test_sliding_window.py"]
    n_all = sum(n.values())
    result.assert_outcomes(passed=3 * n_all - n_swa, skipped=n_swa)
    assert "has no attribute 'sliding_window_attention'" in result.stdout.str()
    cells = conformance(report)
    for (prop, target), cell in cells.items():
        if target == "torch.nn.functional" and prop.startswith("sliding_window."):
            assert cell.startswith("skipped"), (prop, target, cell)
        else:
            assert cell == "pass" or cell.startswith("convention:"), (prop, target, cell)
    # the defaults: top-left causal, the protocol's w window; torch and reference agree on zeros
    for target in ("reference", "torch.nn.functional", str(PLANTED / "_base.py")):
        assert cells[("attention.causal", target)] == "convention:top_left"
        assert cells[("attention.fully_masked_rows", target)] == "convention:zeros"
    assert cells[("sliding_window.window_extent", "reference")] == "convention:w"


def test_failure_detail_in_the_report(pytester, tmp_path):
    """The conformance report's failure detail says what went wrong, not just 'fail'."""
    report = tmp_path / "report"
    run_suite(pytester, [suite_file("test_attention_masks.py")], [PLANTED / "finite_mask_constant.py"],
              "test_bool_mask", "--conformance-report", str(report))
    rows = json.loads((report / "conformance.json").read_text())["results"]
    (row,) = [r for r in rows if r["property"] == "attention.bool_mask"]
    assert row["result"] == "fail"
    assert row["detail"].startswith("property violated: masked keys"), row["detail"]
