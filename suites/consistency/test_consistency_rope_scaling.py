"""Consistency of the scaled-RoPE names: ``rope_frequencies`` has no differential check of its own
(its record says why: ``rope_scaling.agreement`` holds every target to the float64 formulas, which is
what a comparison between targets would hold them to). How the other families are compared:
``suites/consistency/differential.py``.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.suites.consistency.differential import Case, not_compared, outputs_agree

#: the plug-in reads it: these tests hold targets to each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True
#: the family of protocol names this module compares (``harness/protocol.py``)
NAMES_OF = "rope_scaling"

#: one differential check per record with ``compared`` (none in this family)
CASES: dict[str, Case] = {}
#: the family's names with no differential check, and why (each record's ``not_compared``)
NOT_COMPARED = not_compared(NAMES_OF)


@pytest.mark.parametrize("name", [*CASES, *NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    outputs_agree(loaded_targets, name, data, CASES, NOT_COMPARED)
