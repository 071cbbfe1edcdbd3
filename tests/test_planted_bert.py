"""The BERT-family suites catch real bugs: each planted-bug target fails exactly the property
meant to catch it, with the property's name and a repro line.

Every target in ``tests/planted/bert/`` has one bug (its docstring says which, and the real
pattern it mimics) on top of a correct base (``_mlm_base.py``, ``_distill_base.py``,
``_span_base.py``) or of the reference models. Each case runs ONE suite test in-process
(``-k``) under the derandomized ``ci`` profile, so the outcome is the same on every run.
Controls: ``reference``, the transformers MLM adapter, the planted bases and the GPT / ELMo
model controls pass every property; the declared fixed-count variant passes.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from planted_support import assert_declared_passes, conformance, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "bert"
MLM, KD, SPAN, MODELS = "test_mlm.py", "test_distillation.py", "test_span_corruption.py", "test_models.py"
BERT_SUITES = [MLM, KD, SPAN, MODELS]


#: (target declaring a convention, suite file, tests that must pass, labels recorded)
DECLARED = [
    ("mlm_fixed_count_per_row_declared.py", MLM, ["test_independence", "test_selection_rate"],
     {"mlm.independence": "convention:fixed_count"}),
]
#: correct targets in the planted folder (bases and model controls) and the suites they serve
CONTROLS = {"_mlm_base.py": [MLM], "_distill_base.py": [KD], "_span_base.py": [SPAN],
            "_model_gpt.py": [MODELS], "_model_elmo.py": [MODELS]}


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
