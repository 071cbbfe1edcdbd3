"""The BERT-family suites catch real bugs: each planted-bug target fails exactly the property
meant to catch it, with the property's name and a repro line.

Every target in ``tests/planted/bert/`` has one bug (its docstring says which, and the real
pattern it mimics) on top of a correct base (``_mlm_base.py``, ``_distill_base.py``,
``_span_base.py``) or of the reference models. Each case runs ONE suite test in-process
(``-k``) under the derandomized ``ci`` profile, so the outcome is the same on every run.
Controls: ``reference``, the transformers MLM adapter, the planted bases and the GPT / ELMo
model controls pass every property; the declared fixed-count variant passes.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from planted_support import assert_caught, assert_declared_passes, conformance, property_of, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "bert"
MLM, KD, SPAN, MODELS = "test_mlm.py", "test_distillation.py", "test_span_corruption.py", "test_models.py"
BERT_SUITES = [MLM, KD, SPAN, MODELS]

#: (planted target, suite file, the one suite test that must fail for it)
BUGS = [
    ("mlm_rate_2_points_low.py", MLM, "test_selection_rate"),
    ("mlm_split_70_20_10.py", MLM, "test_replacement_split"),
    ("mlm_split_78_12_10.py", MLM, "test_replacement_split"),
    ("mlm_random_unscaled.py", MLM, "test_replacement_split"),
    ("mlm_no_random.py", MLM, "test_replacement_split"),
    ("mlm_random_out_of_vocab.py", MLM, "test_replacement_split"),
    ("mlm_special_selectable.py", MLM, "test_special_tokens"),
    ("mlm_labels_zero.py", MLM, "test_labels"),
    ("mlm_labels_everywhere.py", MLM, "test_labels"),
    ("mlm_global_rng.py", MLM, "test_generator"),
    ("mlm_static_mask.py", MLM, "test_dynamic_masking"),
    ("mlm_fixed_count_per_row.py", MLM, "test_independence"),
    ("mlm_fixed_count_per_batch.py", MLM, "test_independence"),
    ("mlm_adjacent_pairs.py", MLM, "test_independence"),
    ("kd_log_of_softmax.py", KD, "test_agreement"),
    ("kd_soft_cross_entropy.py", KD, "test_nonnegative"),
    ("kd_kl_reversed.py", KD, "test_direction"),
    ("kd_no_t_squared.py", KD, "test_temperature"),
    ("kd_teacher_no_temperature.py", KD, "test_temperature"),
    ("kd_sum_not_mean.py", KD, "test_reduction"),
    ("kd_batchmean_unflattened.py", KD, "test_reduction"),
    ("kd_naive_plogp.py", KD, "test_one_hot"),
    ("span_drop_last_token.py", SPAN, "test_reconstruction"),
    ("span_one_sentinel.py", SPAN, "test_sentinels"),
    ("span_empty_spans.py", SPAN, "test_spans"),
    ("span_density_as_span_rate.py", SPAN, "test_noise_density"),
    ("span_length_ignored.py", SPAN, "test_span_length"),
    ("span_global_rng.py", SPAN, "test_generator"),
    ("model_bert_is_decoder.py", MODELS, "test_dependency"),
    ("model_gpt_leak.py", MODELS, "test_dependency"),
    ("model_elmo_claims_bidirectional.py", MODELS, "test_dependency"),
    ("bert_large_ffn_3072.py", MODELS, "test_param_count"),
    ("segment_ignored.py", MODELS, "test_embedding_sum"),
    ("sep_in_segment_b.py", MODELS, "test_special_placement"),
    ("nsp_any_sentence.py", MODELS, "test_nsp"),
    ("nsp_fallback_is_next.py", MODELS, "test_nsp"),
]

#: what the failure must say besides the property name, where the bug calls for it
MESSAGES = {
    "mlm_rate_2_points_low.py": ["mlm_probability = 0.15", "a correct implementation is within"],
    "mlm_split_78_12_10.py": ["expected 80/10/10", "mask by -"],
    "mlm_random_out_of_vocab.py": ["outside the vocabulary"],
    "mlm_labels_zero.py": ["neither -100 nor the original id"],
    "mlm_labels_everywhere.py": ["has a label"],
    "mlm_static_mask.py": ["static masking"],
    "mlm_fixed_count_per_row.py": ["convention mismatch", "mlm_selection: the code follows fixed_count",
                                   "HARNESS_CONVENTIONS"],
    "mlm_fixed_count_per_batch.py": ["mlm_selection: the code follows fixed_count", "batches"],
    "mlm_adjacent_pairs.py": ["matches no known convention"],
    "kd_log_of_softmax.py": ["inf"],
    "kd_soft_cross_entropy.py": ["entropy"],
    "kd_kl_reversed.py": ["KL(student || teacher)"],
    "kd_no_t_squared.py": ["without the T^2 factor"],
    "kd_teacher_no_temperature.py": ["softens only the student"],
    "kd_sum_not_mean.py": ["the sum over rows"],
    "kd_batchmean_unflattened.py": ["batch size B only"],
    "kd_naive_plogp.py": ["NaN"],
    "span_one_sentinel.py": ["sentinels are"],
    "span_empty_spans.py": ["empty"],
    "model_bert_is_decoder.py": ["but the model is causal"],
    "model_gpt_leak.py": ["none of bidirectional/causal/concat_unidirectional"],
    "model_elmo_claims_bidirectional.py": ["but the model is concat_unidirectional"],
    "bert_large_ffn_3072.py": ["BERT-large"],
    "segment_ignored.py": ["segment ids change nothing"],
    "nsp_any_sentence.py": ["labelled NotNext (1), but B"],
    "nsp_fallback_is_next.py": ["IsNext, expected 50 %"],
}

#: (target declaring a convention, suite file, tests that must pass, labels recorded)
DECLARED = [
    ("mlm_fixed_count_per_row_declared.py", MLM, ["test_independence", "test_selection_rate"],
     {"mlm.independence": "convention:fixed_count"}),
]
#: correct targets in the planted folder (bases and model controls) and the suites they serve
CONTROLS = {"_mlm_base.py": [MLM], "_distill_base.py": [KD], "_span_base.py": [SPAN],
            "_model_gpt.py": [MODELS], "_model_elmo.py": [MODELS]}


def test_table_is_consistent():
    """Every planted file is listed (or is a base / control / declared variant), every planted bug
    names its pattern, and every property of the four suites has at least one bug it catches."""
    files = {p.name for p in PLANTED.glob("*.py") if not p.name.startswith("history_")}  # (test_planted_history.py)
    listed = {b for b, _, _ in BUGS} | {d[0] for d in DECLARED} | set(CONTROLS) | {"_mlm_base.py"}
    assert files == listed, f"unlisted: {sorted(files - listed)}; missing: {sorted(listed - files)}"
    assert len(BUGS) >= 10
    for bug, suite, test in BUGS:
        assert test in suite_tests(suite), f"{test} is not a test of {suite}"
        doc = " ".join((PLANTED / bug).read_text().split())
        assert doc.startswith('"""Planted bug'), f"{bug}: module docstring must describe the bug"
        assert "Real pattern" in doc and "Caught by: " + property_of(suite, test) in doc, \
            f"{bug}: the docstring must give the real pattern and 'Caught by: {property_of(suite, test)}'"
    properties = {property_of(s, t) for s in BERT_SUITES for t in suite_tests(s)}
    assert properties == {property_of(s, t) for _, s, t in BUGS}, "a property has no planted bug"


@pytest.mark.parametrize("bug,suite,test", BUGS, ids=[b.removesuffix(".py") for b, _, _ in BUGS])
def test_planted_bug_is_caught(pytester, bug, suite, test):
    assert_caught(pytester, suite, PLANTED / bug, test, MESSAGES.get(bug, []))


# (``target`` is the harness plug-in's parameter name, hence ``planted``)
@pytest.mark.parametrize("planted,suite,tests,labels", DECLARED, ids=[d[0].removesuffix(".py") for d in DECLARED])
def test_declared_convention_passes(pytester, tmp_path, planted, suite, tests, labels):
    assert_declared_passes(pytester, tmp_path / "report", suite, PLANTED / planted, tests, labels)


def test_correct_targets_pass_everything(pytester, tmp_path):
    """``reference`` passes every property of the four suites, and the transformers collator
    adapter every MLM property (it skips the others by name); MLM selection is independent."""
    report = tmp_path / "report"
    adapter = "harness.adapters.hf_mlm"
    result = run_suite(pytester, BERT_SUITES, ["reference", adapter], None, "--conformance-report", str(report))
    n_all, n_mlm = sum(len(suite_tests(s)) for s in BERT_SUITES), len(suite_tests(MLM))
    result.assert_outcomes(passed=n_all + n_mlm, skipped=n_all - n_mlm)
    cells = conformance(report)
    for (prop, target), cell in cells.items():
        if target == adapter and not prop.startswith("mlm."):
            assert cell.startswith("skipped"), (prop, target, cell)
        else:
            assert cell == "pass" or cell.startswith(("convention:", "profile:")), (prop, target, cell)
    for target in ("reference", adapter):
        assert cells[("mlm.independence", target)] == "convention:independent"
    assert cells[("models.dependency", "reference")] == "profile:bidirectional"


@pytest.mark.parametrize("control", sorted(CONTROLS), ids=[c.removesuffix(".py") for c in sorted(CONTROLS)])
def test_planted_bases_pass(pytester, tmp_path, control):
    """The bases the bugs are planted on, and the GPT / ELMo controls, pass their suites: each
    bug's failure is the bug's."""
    report = tmp_path / "report"
    k = "test_dependency" if control.startswith("_model") else None
    result = run_suite(pytester, CONTROLS[control], [PLANTED / control], k, "--conformance-report", str(report))
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0 and outcomes.get("passed", 0) >= 1, \
        result.stdout.str()[-3000:]
    if control == "_model_gpt.py":
        assert conformance(report)[("models.dependency", str(PLANTED / control))] == "profile:causal"
    if control == "_model_elmo.py":
        assert conformance(report)[("models.dependency", str(PLANTED / control))] == "profile:concat_unidirectional"
