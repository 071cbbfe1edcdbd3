"""Every statistical property states its false-failure bound, and the bound holds per run
(<= 1e-6, union over the examples it draws), whatever the Hypothesis profile: the number of
examples is fixed by the property's own ``@settings(max_examples=...)``, and the per-example
delta it uses times that number is within the budget. A sweep at random seeds cannot fail them
by chance."""
from __future__ import annotations

import pytest

from harness.suites.attention import test_attention_dropout as dropout
from harness.suites.bert import test_mlm as mlm
from harness.suites.bert import test_models as models
from harness.suites.bert import test_span_corruption as span
from harness.suites.bert.configs import DELTA

#: (property test, examples it may draw per run, per-example false-failure bound, events per example)
STATISTICAL = [
    (dropout.test_dropout_keep_rate, dropout.KEEP_RATE_EXAMPLES, dropout.ALPHA, 1),
    (mlm.test_selection_rate, mlm.STAT_EXAMPLES, DELTA / mlm.STAT_EXAMPLES, 1),
    (mlm.test_replacement_split, mlm.STAT_EXAMPLES, DELTA / (mlm.STAT_EXAMPLES * 3), 3),
    (mlm.test_independence, 3, DELTA / (3 * 4), 4),
    (span.test_noise_density, span.STAT_EXAMPLES, DELTA / (span.STAT_EXAMPLES * (len(span.CHECKPOINTS) + 1)),
     len(span.CHECKPOINTS) + 1),
    (span.test_span_length, span.STAT_EXAMPLES, DELTA / (span.STAT_EXAMPLES * (len(span.CHECKPOINTS) + 1)),
     len(span.CHECKPOINTS) + 1),
    (models.test_nsp, models.NSP_EXAMPLES, DELTA / models.NSP_EXAMPLES, 1),
]


def test_the_budget_is_one_in_a_million_per_run():
    assert DELTA == dropout.DELTA == 1e-6


@pytest.mark.parametrize("test, examples, per_event, events", STATISTICAL, ids=lambda v: getattr(v, "__name__", ""))
def test_bound_per_run_within_the_budget(test, examples, per_event, events):
    fixed = test._hypothesis_internal_use_settings.max_examples
    assert fixed == examples, f"{test.__name__} draws {fixed} examples per run, its bound is for {examples}"
    assert fixed * events * per_event <= DELTA * (1 + 1e-12)
