"""The cached T5 bias module: one instance, called again and again, equals the stateless lookup.

    T5RelativePositionBias(num_heads, bidirectional=True, num_buckets=32, max_distance=128)
        built once, in the target's worker; its learned table is relative_attention_bias.weight
        (num_buckets, H), which the harness overwrites between calls as a training step does
    forward(query_len, key_len) -> (H, Lq, Lk)
        == t5_relative_position_bias(table, Lq, Lk, ...)   (reference/t5_bias.py: query i at
           position Lk - Lq + i; bias[h, i, j] = table[bucket(j - p_i), h], exactly)

A module may cache the bucket indices of a (Lq, Lk) (they never change); the values must be read
from the table at each call, or the next training step trains a bias the model no longer uses.
Buckets where the float32 logarithm could land on either side of a boundary accept either (as
``t5_bucket``). The calls are drawn by ``suites/positions/module_calls.py``'s state machine.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import strategies as st

from harness.reference.t5_bias import relative_positions
from harness.suites.positions.configs import T5_MAX_DISTANCE, T5_NUM_BUCKETS, BiasCallsConfig
from harness.suites.positions.module_calls import Spec, replay, run_machine
from harness.suites.stateful import Verdict
from harness.suites.positions.test_t5_bucket import accepted

PROPERTY_PREFIX = "t5_bias_module"
MODULE = "T5RelativePositionBias"
pytestmark = pytest.mark.needs(MODULE)


def expected(cfg: BiasCallsConfig, Lq: int, Lk: int, table: torch.Tensor, start: bool = False):
    """(lo, hi): the two accepted values of every entry, (H, Lq, Lk) float64; ``start``: the values
    for queries at positions 0 .. Lq - 1 instead (a cache sliced from the wrong end)."""
    rp = relative_positions(Lq, Lk) if not start else torch.arange(Lk)[None, :] - torch.arange(Lq)[:, None]
    lo, hi = accepted(rp, cfg.bidirectional, cfg.num_buckets, cfg.max_distance)
    t = table.double()
    return t[lo].permute(2, 0, 1), t[hi].permute(2, 0, 1)


def judge(out: torch.Tensor, dtype: torch.dtype, cfg: BiasCallsConfig, Lq: int, Lk: int,
          table: torch.Tensor) -> Verdict:
    lo, hi = expected(cfg, Lq, Lk, table)
    ok = (out == lo) | (out == hi)
    if bool(ok.all()):
        return Verdict(True)
    h, i, j = (int(v) for v in (~ok).nonzero()[0])
    hints = []
    if Lq < Lk and bool(torch.isin(out, torch.stack(expected(cfg, Lq, Lk, table, start=True))).all()):
        hints.append("the values are those of queries at positions 0 .. Lq - 1: a cache sliced from the wrong end")
    for older in range(max((c[3] for c in cfg.calls), default=0) + 1):
        if torch.equal(cfg.table(older), table):
            continue
        a, b = expected(cfg, Lq, Lk, cfg.table(older))
        if bool(((out == a) | (out == b)).all()):
            hints.append(f"the values are table version {older}'s: the bias was cached after the table changed")
            break
    return Verdict(False, f"head {h}, query {i} (position {Lk - Lq + i}), key {j}: {float(out[h, i, j]):.6g}, the "
                          f"table holds {float(lo[h, i, j]):.6g} there ({int((~ok).sum())} of {ok.numel()} entries "
                          f"differ; the bias is a lookup, exact)" + "".join(f"; {t}" for t in hints))


@st.composite
def _arguments(draw) -> dict:
    nb = draw(st.sampled_from(T5_NUM_BUCKETS))
    return {"heads": draw(st.integers(1, 8)), "bidirectional": draw(st.booleans()), "num_buckets": nb,
            "max_distance": draw(st.sampled_from([d for d in T5_MAX_DISTANCE if d > nb // 2]))}


SPEC = Spec(MODULE, judge=judge, configs=_arguments(), learned=True,
            build=lambda cls, cfg: cls(cfg.heads, bidirectional=cfg.bidirectional, num_buckets=cfg.num_buckets,
                                       max_distance=cfg.max_distance))


def check_call_sequences(target, cfg: BiasCallsConfig):
    """One ``T5RelativePositionBias`` instance, called in a sequence a Hypothesis state machine draws: every
    call, made in order on the ONE instance built first (its table rewritten between some calls, where the
    sequence says), equals the stateless lookup. Replays a shrunk sequence."""
    replay(target, SPEC, cfg)


def test_call_sequences(target):
    run_machine(target, SPEC, check_call_sequences)
