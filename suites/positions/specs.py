"""The position-encoding names in the suites that run across names: their histories
(``history.<name>``, ``suites/test_history.py``) and their differential checks (the session's targets
held to each other on the same inputs: ``apply_rotary_embedding`` with its default base, each target in
its declared ``rope_layout`` (a rotate_half one is given the same pairs at (j, j + D/2)), ``alibi_bias``
up to the per-row constant softmax ignores on the causal keys, ``alibi_slopes``,
``t5_relative_position_bucket`` and ``t5_relative_position_bias`` exactly except within 1e-4 of a
float32 bucket boundary, ``sinusoidal_position_embedding`` with each table in its declared
``sinusoidal_layout``, read in the interleaved frame; ``suites/consistency/differential.py``).

    x (B, H, L, D); biases (H, Lq, Lk)
"""
from __future__ import annotations

from dataclasses import replace

import torch
from hypothesis import strategies as st

from harness.spec import tolerance
from harness.spec.configs import HistoryConfig
from harness.reference.alibi import alibi_distance, alibi_math, get_slopes
from harness.reference.rope import LAYOUTS
from harness.reference.sinusoidal import sin_cos_columns, sinusoidal_math
from harness.reference.t5_bias import relative_positions
from harness.suites.consistency.differential import Case, as_float64, call_function, exact, policy
from harness.suites.histories import History
from harness.suites.positions import (test_alibi as alibi, test_rope as rope, test_sinusoidal as sinusoidal,
                                      test_t5_bias as t5_bias, test_t5_bucket as t5_bucket)
from harness.suites.positions.configs import (RopeConfig, alibi_configs, rope_configs, sinusoidal_configs,
                                              t5_bias_configs, t5_bucket_configs)
from harness.suites.positions.helpers import rope_naive, rope_truth
from harness.suites.positions.test_t5_bucket import accepted


# ---- histories ------------------------------------------------------------------------------------

@st.composite
def rope_calls(draw):
    """RoPE calls where a positions cache is used: mostly contiguous positions ``offset +
    arange(L)``, shared (L,), from 0 or a small offset (rotary-embedding-torch caches up to 8192)."""
    cfg = draw(rope_configs())
    offset = draw(st.sampled_from([0, 0, 1, 2]).flatmap(lambda k: st.just(0) if k == 0 else (
        st.integers(1, 64) if k == 1 else st.integers(65, 4000))))  # 0 half the time
    return replace(cfg, spread=draw(st.sampled_from([0, 0, 0, 8])),
                               per_batch=draw(st.sampled_from([False, False, False, True])), offset=offset)


def _rope_history(*calls: RopeConfig) -> HistoryConfig:
    return HistoryConfig(name="apply_rotary_embedding", calls=tuple(c.to_json() for c in calls))


_ROPE = RopeConfig(batch=1, heads=2, L=8, D=16, dtype="float32", base=10000.0, offset=0, spread=0,
                   per_batch=False, shift=0, seed=1)
#: histories aimed at a positions cache by construction, run first on every profile (random draws
#: hit an offset cache in ~13 % of histories, so whether a profile's few examples find one would
#: depend on the draw): the same call from offset 0 after one at an offset that needs more rows
#: than cached (an offset cache stores the rows of positions o.. as rows 0..), after a longer one,
#: and after the same call in another dtype
ROPE_HISTORIES = (
    _rope_history(_ROPE, replace(_ROPE, offset=3, L=12, seed=2), _ROPE),
    _rope_history(_ROPE, replace(_ROPE, L=40, seed=3), replace(_ROPE, L=5, seed=4)),
    _rope_history(_ROPE, replace(_ROPE, dtype="bfloat16", offset=2, seed=5)),
)


def sinusoidal_table(target, cfg):
    """The whole (num_positions, dim) table equals the float64 formula in the measured layout."""
    layout = sinusoidal.table_layout(target, cfg)
    N, d = cfg.num_positions, cfg.dim
    pe = sinusoidal.call_pe(target, N, d)
    tolerance.assert_close(pe, sinusoidal.truth(N, d, layout), sinusoidal.naive(N, d, layout, pe.dtype),
                           dtype=pe.dtype, what=f"sinusoidal table ({N} positions, dim {d}, {layout})")


HISTORIES = (
    History(name="apply_rotary_embedding", configs=rope_calls(), judge=rope.check_agreement,
            keep=(("D", "base"), "dtype"),
            vary=("offset", "L", "dtype", ("batch", "heads"), ("spread", "per_batch")), explicit=ROPE_HISTORIES,
            note=" (mostly contiguous positions from offset 0 or a small offset)"),
    History(name="sinusoidal_position_embedding", configs=sinusoidal_configs(), judge=sinusoidal_table,
            keep=("dim",), judged_by="the whole table against the float64 formula (in the measured layout)"),
    History(name="alibi_slopes", configs=alibi_configs(), judge=alibi.check_slopes),
    History(name="alibi_bias", configs=alibi_configs(), judge=alibi.check_end_alignment, keep=("heads",)),
    History(name="t5_relative_position_bucket", configs=t5_bucket_configs(), judge=t5_bucket.check_mesh_tf,
            keep=(("num_buckets", "max_distance"),)),
    History(name="t5_relative_position_bias", configs=t5_bias_configs(square=True), judge=t5_bias.check_lookup,
            keep=(("heads", "num_buckets", "max_distance", "bidirectional"),)),
)


# ---- differential checks ----------------------------------------------------------------------------

def _rope_calls(cfg, device):
    return [("default base", (cfg.x(device), cfg.positions(device)), {})]


def _rotate_half_order(D: int, device) -> torch.Tensor:
    """Index i such that ``x[..., i]`` moves interleaved pair (2j, 2j + 1) to (j, j + D/2)."""
    return torch.cat([torch.arange(0, D, 2, device=device), torch.arange(1, D, 2, device=device)])


def _rope_invoke(target, name, cfg, args, kwargs):
    """Each target in its declared ``rope_layout``, compared in the interleaved frame (the
    reference's pairing, and that of a target that declares none): a ``rotate_half`` target gets
    the interleaved pairs moved to (j, j + D/2) and its output moved back, so both pairings are held
    to the same rotation (two named conventions are not a disagreement; a wrong angle still is)."""
    if target.conventions.get("rope_layout") != "rotate_half":
        return call_function(target, name, cfg, args, kwargs)
    x, pos = args
    idx = _rotate_half_order(x.shape[-1], x.device)
    out = call_function(target, name, cfg, (x[..., idx], pos), kwargs)
    return out[..., torch.argsort(idx)] if isinstance(out, torch.Tensor) and out.shape[-1:] == x.shape[-1:] else out


def _rope_judge(cfg, label, args, kwargs, out_dtype):
    x, pos = (t.cpu() for t in args)
    truth = rope_truth(x, pos, 10000.0, "rotate_half")  # (the yardstick's size: the worse layout's)
    naive = tolerance.worst_naive(truth, [rope_naive(x, pos, 10000.0, lay) - rope_truth(x, pos, 10000.0, lay)
                                          + truth for lay in LAYOUTS])
    return as_float64, policy(truth, naive, x.dtype)


def _alibi_calls(cfg, device):
    return [("bias", (cfg.heads, cfg.Lq, cfg.Lk), {})]


def _alibi_judge(cfg, label, args, kwargs, out_dtype):
    H, Lq, Lk = args
    p = torch.arange(Lq) + (Lk - Lq)
    causal = alibi_distance(Lq, Lk) >= 0

    def relative(out):  # minus each row's value at its own position; the causal keys only
        out = as_float64(out)
        rel = out - out.gather(-1, p.view(1, Lq, 1).expand(H, Lq, 1))
        return rel.masked_fill(~causal, 0)

    truth = alibi_math(H, Lq, Lk)
    return relative, policy(truth, alibi_math(H, Lq, Lk, compute_dtype=out_dtype).double(), out_dtype)


def _bucket_calls(cfg, device):
    rp = cfg.relative_positions(device)
    return [("defaults", (rp,), {}), ("bidirectional=False", (rp,), {"bidirectional": False})]


def _bucket_exempt(cfg, label, args, kwargs):
    lo, hi = accepted(args[0].cpu(), kwargs.get("bidirectional", True), 32, 128)
    return lo != hi


def _defaults(cfg):
    """The protocol's T5 defaults (num_buckets=32, max_distance=128, bidirectional), so the config
    printed is the one called."""
    return replace(cfg, num_buckets=32, max_distance=128, bidirectional=True)


def _bias_calls(cfg, device):
    table = cfg.table().to(device)  # (32, H): the default num_buckets
    return [("defaults", (table, cfg.Lq, cfg.Lk), {})]


def _bias_exempt(cfg, label, args, kwargs):
    lo, hi = accepted(relative_positions(cfg.Lq, cfg.Lk), True, 32, 128)
    return (lo != hi).expand(cfg.heads, cfg.Lq, cfg.Lk)


def _sinusoidal_calls(cfg, device):
    return [("table", (cfg.num_positions, cfg.dim), {})]


def _sinusoidal_invoke(target, name, cfg, args, kwargs):
    """Each target's table in its declared ``sinusoidal_layout``, read in the interleaved frame
    (the reference's columns, and those of a target that declares none): a concatenated table's
    columns [sin ..., cos ...] move to [sin w_0, cos w_0, ...], so two named layouts are not a
    disagreement (a wrong frequency still is)."""
    out = call_function(target, name, cfg, args, kwargs)
    layout, dim = target.conventions.get("sinusoidal_layout", "interleaved"), args[1]
    if layout == "interleaved" or dim % 2 or not (isinstance(out, torch.Tensor) and out.shape[-1:] == (dim,)):
        return out
    return out[..., torch.stack(sin_cos_columns(dim, layout), dim=1).flatten().to(out.device)]


def _sinusoidal_judge(cfg, label, args, kwargs, out_dtype):
    truth = sinusoidal_math(*args)
    return as_float64, policy(truth, sinusoidal_math(*args, compute_dtype=out_dtype).double(), out_dtype)


def _slopes_calls(cfg, device):
    return [("slopes", (cfg.heads,), {})]


def _slopes_judge(cfg, label, args, kwargs, out_dtype):
    truth = torch.tensor(get_slopes(args[0]), dtype=torch.float64)
    return as_float64, policy(truth, truth.to(out_dtype).double(), out_dtype)


#: one differential check per record with ``compared`` (harness/spec/protocol.py says how, in words)
CASES: dict[str, Case] = {
    "apply_rotary_embedding": Case(rope_configs().map(lambda c: replace(c, base=10000.0)), _rope_calls, _rope_judge,
                                   invoke=_rope_invoke),
    "alibi_bias": Case(alibi_configs(), _alibi_calls, _alibi_judge),
    "t5_relative_position_bucket": Case(t5_bucket_configs().map(_defaults), _bucket_calls, exact, _bucket_exempt),
    "t5_relative_position_bias": Case(t5_bias_configs().map(_defaults), _bias_calls, exact, _bias_exempt),
    "sinusoidal_position_embedding": Case(sinusoidal_configs(), _sinusoidal_calls, _sinusoidal_judge,
                                          invoke=_sinusoidal_invoke),
    "alibi_slopes": Case(alibi_configs(), _slopes_calls, _slopes_judge),
}

