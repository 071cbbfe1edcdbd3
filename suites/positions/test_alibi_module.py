"""The cached ALiBi module: one instance, called again and again, equals the stateless bias.

    AlibiPositionalBias(num_heads)        built once, in the target's worker, and kept
    forward(query_len, key_len)           (H, Lq, Lk): query i at position p = Lk - Lq + i
        == alibi_bias(H, Lq, Lk)          (reference/alibi.py; compared as the alibi suite does:
                                           the causal keys j <= p, up to a per-row constant)

x-transformers' ``AlibiPositionalBias(heads, total_heads)(i, j)`` keeps the bias of its longest
call and slices it for later ones; up to 1.22.16 it sliced ``bias[..., :i, :j]``, the rows of the
FIRST queries, so after a prefill of 10 a decoding call (1, 5) got the bias of position 0 instead of
4 (1.22.17 slices ``[..., -i:, -j:]``). That shows because x-transformers' bias is symmetric,
-slope * |p - j|: on the causal keys every row of the signed form -slope * (p - j) is the same row
up to a constant, so a slice from the wrong end is harmless there, and the check does not call it
a bug. The calls are drawn by ``suites/positions/module_calls.py``'s
state machine; a failure is the shrunk call sequence, and its repro line replays it.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.reference.alibi import alibi_distance, alibi_math
from harness.suites.positions.configs import ALIBI_HEADS, BiasCallsConfig
from harness.suites.positions.module_calls import Spec, replay, run_machine
from harness.suites.stateful import Verdict

PROPERTY_PREFIX = "alibi_module"
MODULE = "AlibiPositionalBias"
pytestmark = pytest.mark.needs(MODULE)


def relative(out: torch.Tensor, Lq: int, Lk: int) -> torch.Tensor:
    """(H, Lq, Lk) minus each row's value at its own position, on the causal keys (0 elsewhere)."""
    p = (torch.arange(Lq) + (Lk - Lq)).view(1, Lq, 1).expand(out.shape[0], Lq, 1)
    return (out - out.gather(-1, p)).masked_fill(alibi_distance(Lq, Lk) < 0, 0)


def judge(out: torch.Tensor, dtype: torch.dtype, cfg: BiasCallsConfig, Lq: int, Lk: int, table) -> Verdict:
    H, causal = cfg.heads, alibi_distance(Lq, Lk) >= 0
    truth = alibi_math(H, Lq, Lk).masked_fill(~causal, 0)
    naive = alibi_math(H, Lq, Lk, compute_dtype=dtype).double().masked_fill(~causal, 0)
    cmp = tolerance.compare(relative(out, Lq, Lk), truth, naive, dtype=dtype)
    return Verdict(cmp.ok, f"{cmp.describe()} on the causal keys, up to each row's constant")


SPEC = Spec(MODULE, build=lambda cls, cfg: cls(cfg.heads), judge=judge,
            configs=st.fixed_dictionaries({"heads": st.sampled_from(ALIBI_HEADS)}))


def check_call_sequences(target, cfg: BiasCallsConfig):
    """One ``AlibiPositionalBias`` instance, called in a sequence a Hypothesis state machine draws: every
    call, made in order on the ONE instance built first, equals ``alibi_bias`` (causal keys, up to a
    per-row constant). Replays a shrunk sequence."""
    replay(target, SPEC, cfg)


def test_call_sequences(target):
    run_machine(target, SPEC, check_call_sequences)
