"""Consistency of the position-encoding names: the session's targets held to each other on the same
inputs (``apply_rotary_embedding`` with its default base, each target in its declared ``rope_layout``
(a rotate_half one is given the same pairs at (j, j + D/2)), ``alibi_bias`` up to the per-row constant
softmax ignores on the causal keys, ``alibi_slopes``, ``t5_relative_position_bucket`` and
``t5_relative_position_bias`` exactly except within 1e-4 of a float32 bucket boundary,
``sinusoidal_position_embedding`` with each table in its declared ``sinusoidal_layout``, read in the
interleaved frame). How the targets are called and compared:
``suites/consistency/differential.py``.

    x (B, H, L, D); biases (H, Lq, Lk)
"""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness import tolerance
from harness.reference.alibi import alibi_distance, alibi_math, get_slopes
from harness.reference.rope import LAYOUTS
from harness.reference.sinusoidal import sin_cos_columns, sinusoidal_math
from harness.reference.t5_bias import relative_positions
from harness.suites.consistency.differential import (Case, as_float64, call_function, exact, not_compared, outputs_agree,
                                             policy)
from harness.suites.positions.configs import (alibi_configs, rope_configs, sinusoidal_configs, t5_bias_configs,
                                      t5_bucket_configs)
from harness.suites.positions.helpers import rope_naive, rope_truth
from harness.suites.positions.test_t5_bucket import accepted

#: the plug-in reads it: these tests hold targets to each other (the consistency section),
#: they are not properties of one target
CONSISTENCY = True
#: the family of protocol names this module compares (``harness/protocol.py``)
NAMES_OF = "positions"


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


#: one differential check per record with ``compared`` (harness/protocol.py says how, in words)
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
#: the family's names with no differential check, and why (each record's ``not_compared``)
NOT_COMPARED = not_compared(NAMES_OF)


@pytest.mark.parametrize("name", [*CASES, *NOT_COMPARED])
@given(data=st.data())
def test_outputs_agree(loaded_targets, name, data):
    """The targets that define ``name`` give the same outputs on the same inputs."""
    outputs_agree(loaded_targets, name, data, CASES, NOT_COMPARED)
