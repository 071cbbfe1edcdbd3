"""The differential checks: the session's targets held to each other on the same inputs, one test per
protocol name (its family declares the ``Case``: ``CASES`` in ``suites/<family>/specs.py``; a name its
record marks ``not_compared`` is skipped with the record's reason), and packed attention held to every
target's SDPA run per sequence (``varlen.py``). How the targets are called and compared:
``differential.py``.
"""
from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from harness.spec import protocol
from harness.suites.consistency import varlen
from harness.suites.consistency.differential import Case, assert_consistent, declared_cases, outputs_agree, sharing

#: the plug-in reads it: these tests hold targets to each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True

#: name -> Case, every family's (``suites/<family>/specs.py``), in the records' order
CASES: dict[str, Case] = declared_cases()
#: the names with no differential check, and why (each record's ``not_compared``)
NOT_COMPARED: dict[str, str] = dict(protocol.NOT_COMPARED)


@pytest.mark.parametrize("name", [n for n in protocol.NAMES if n in CASES or n in NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    outputs_agree(loaded_targets, name, data, CASES, NOT_COMPARED)


@pytest.mark.parametrize("name", [varlen.VS_DENSE])
@given(data=st.data())
def test_varlen_against_dense(loaded_targets, name, data):
    """Every target's ``attention_varlen`` and every target's SDPA run per sequence agree on the
    same packed inputs (``suites/consistency/varlen.py``)."""
    if len(loaded_targets) < 2:
        pytest.skip("a differential check needs two or more loaded --impl targets")
    packed, dense = sharing(loaded_targets, "attention_varlen"), sharing(loaded_targets, varlen.SDPA)
    if not packed or not dense:
        pytest.skip("needs a target with attention_varlen and one with scaled_dot_product_attention")
    cfg = data.draw(varlen.CONFIGS, label="cfg")
    packed, dense = [t for t in packed if t.supports(cfg)], [t for t in dense if t.supports(cfg)]
    calls = varlen.calls(cfg, (packed or dense)[0].device)
    results = varlen.packed_and_dense(packed, dense, cfg, *calls[0][1:])
    roles = {r.name for r, _ in results}
    assume("attention_varlen" in roles and len(roles) == 2)  # (one role's targets alone: the check above)
    assert_consistent(name, cfg, Case(None, varlen.calls, varlen.judge), calls, results)
