"""T5 relative position bias conformance: the glue from positions to the (H, Lq, Lk) bias.

    t5_relative_position_bias(table (num_buckets, H), query_len, key_len, bidirectional,
                              num_buckets, max_distance) -> (H, Lq, Lk)
    query i sits at p_i = Lk - Lq + i (aligned to the END of the keys, as in KV-cache decoding)
    bias[h, i, j] = table[bucket(j - p_i), h]      (the bucket of key - query; t5_bucket's sign)

The seeds write the bias b(m, n) of "the relative distance m - n" quantized into buckets; the
bucket function's own argument sign is Mesh TensorFlow's (key - query, ``t5_relative_position_bucket``),
and Hugging Face T5, Mesh TF and x-transformers all call it on key - query: query - key puts
past keys in the future half. That is a bug, not a convention (no correct library does it).
Start alignment (query i at position i) for Lq < Lk is x-transformers 1.0.1's bug (fixed in
1.0.2), not a convention: a decoding step would read the biases of the first query.

Most checks use a probe table whose entry [b, h] is h * num_buckets + b: every value of the
output names the bucket and the head it was read from. Buckets where the float32 logarithm
Mesh TF and HF use could land on either side of a boundary accept either bucket (as t5_bucket).
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given

from harness.suites.positions.configs import t5_bias_configs
from harness.suites.kit import impl, run
from harness.reference.t5_bias import relative_positions
from harness.suites.positions.helpers import expect_floating
from harness.suites.positions.test_t5_bucket import accepted

PROPERTY_PREFIX = "t5_bias"
BIAS = "t5_relative_position_bias"
pytestmark = pytest.mark.needs(BIAS)


def call_bias(target, table: torch.Tensor, cfg) -> torch.Tensor:
    """The target's bias for ``table``: (H, Lq, Lk), float64 on the CPU."""
    out = impl(target, BIAS)(table.to(target.device), cfg.Lq, cfg.Lk, bidirectional=cfg.bidirectional,
                             num_buckets=cfg.num_buckets, max_distance=cfg.max_distance)
    return expect_floating(out, BIAS, (cfg.heads, cfg.Lq, cfg.Lk)).double()


def decode(target, cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """(head, bucket) each output entry was read from, (H, Lq, Lk) int64, via the probe table."""
    out = call_bias(target, cfg.probe_table(), cfg)
    whole = out.round()
    if not bool(((out - whole).abs() < 1e-3).all() & (whole >= 0).all()
                & (whole < cfg.heads * cfg.num_buckets).all()):
        h, i, j = (int(v) for v in (~((out - whole).abs() < 1e-3) | (whole < 0)
                                    | (whole >= cfg.heads * cfg.num_buckets)).nonzero()[0])
        raise AssertionError(f"head {h}, query {i}, key {j}: value {out[h, i, j]:.6g} is no entry of the table "
                             f"(a probe table of the integers 0 .. {cfg.heads * cfg.num_buckets - 1}): the bias "
                             f"must be the table's entries, unscaled")
    whole = whole.to(torch.int64)
    return whole // cfg.num_buckets, whole % cfg.num_buckets


def buckets_for(rp: torch.Tensor, cfg) -> tuple[torch.Tensor, torch.Tensor]:
    """(lo, hi): the accepted buckets of the relative positions ``rp`` (equal away from a float32
    rounding boundary)."""
    return accepted(rp, cfg.bidirectional, cfg.num_buckets, cfg.max_distance)


def within(b: torch.Tensor, lo_hi) -> torch.Tensor:
    lo, hi = lo_hi
    return (b >= lo) & (b <= hi)


def check_lookup(target, cfg):
    """``t5_relative_position_bias`` with a random table (Lq = Lk, where every alignment agrees): the output
    has shape (H, Lq, Lk) and holds exactly table[bucket(key - query), h], unscaled (x-transformers
    multiplies its bias by its attention scale) and unrounded."""
    table = cfg.table()
    out = call_bias(target, table, cfg)
    lo, hi = buckets_for(relative_positions(cfg.Lq, cfg.Lk), cfg)  # (Lq, Lk)
    t = table.double()
    ok = (out == t[lo].permute(2, 0, 1)) | (out == t[hi].permute(2, 0, 1))
    if not bool(ok.all()):
        h, i, j = (int(v) for v in (~ok).nonzero()[0])
        want = t[lo[i, j], h]
        raise AssertionError(f"head {h}, query {i}, key {j}: bias {out[h, i, j]:.8g}, but the table holds "
                             f"{want:.8g} at bucket {int(lo[i, j])} (ratio {out[h, i, j] / want:.4g}); the "
                             f"bias is the table's entry itself ({int((~ok).sum())} of {ok.numel()} differ)")


def check_end_alignment(target, cfg):
    """Lq < Lk (1 often: a decoding step): query row i sits at position Lk - Lq + i (the last Lq positions, as
    when decoding with a KV cache), so it reads bucket(j - (Lk - Lq + i)) for key j; start alignment is
    named as x-transformers 1.0.1's bug (fixed in 1.0.2)."""
    _, bucket = decode(target, cfg)
    rp = relative_positions(cfg.Lq, cfg.Lk)
    ok = within(bucket, buckets_for(rp, cfg))
    if bool(ok.all()):
        return
    start = relative_positions(cfg.Lq, cfg.Lq)[:, :1] + torch.arange(cfg.Lk)[None, :]  # j - i
    start_aligned = bool(within(bucket, buckets_for(start, cfg)).all())
    h, i, j = (int(v) for v in (~ok).nonzero()[0])
    why = (" The buckets are those of queries at positions 0 .. Lq - 1: queries aligned to the START of the "
           "keys (x-transformers 1.0.1's RelativePositionBias; fixed in 1.0.2)" if start_aligned else "")
    raise AssertionError(f"Lq={cfg.Lq}, Lk={cfg.Lk}: query row {i} (position {cfg.Lk - cfg.Lq + i}), key {j} "
                         f"(relative position {int(rp[i, j])}) reads bucket {int(bucket[h, i, j])}, expected "
                         f"{int(buckets_for(rp, cfg)[0][i, j])}: queries must be aligned to the end of the "
                         f"keys.{why}")


def check_heads(target, cfg):
    """Head h reads column h of the table (its own learned biases), for every query and key."""
    head, _ = decode(target, cfg)
    want = torch.arange(cfg.heads).view(-1, 1, 1).expand_as(head)
    if not torch.equal(head, want):
        h, i, j = (int(v) for v in (head != want).nonzero()[0])
        read = sorted(set(head[h].flatten().tolist()))
        raise AssertionError(f"head {h} (query {i}, key {j}) reads column {int(head[h, i, j])} of the "
                             f"(num_buckets, H={cfg.heads}) table; head {h} reads columns {read[:8]}: each head "
                             f"must read its own column")


def check_relative_sign(target, cfg):
    """Lq = Lk: the bucket function is called on key - query (keys after the query in the future half when
    bidirectional, bucket 0 when causal), not on query - key. Mesh TF, HF T5 and x-transformers do; query -
    key is a bug, not a convention: the seeds' "distance m - n" names the distance, the bucket function's
    argument sign is Mesh TF's."""
    _, bucket = decode(target, cfg)
    rp = relative_positions(cfg.Lq, cfg.Lk)
    ok = within(bucket, buckets_for(rp, cfg))
    if bool(ok.all()):
        return
    flipped = bool(within(bucket, buckets_for(-rp, cfg)).all())
    h, i, j = (int(v) for v in (~ok).nonzero()[0])
    why = " They are the buckets of query - key: the bucket function is called with the wrong sign" if flipped else ""
    raise AssertionError(f"bidirectional={cfg.bidirectional}: query {i}, key {j} (key - query = {int(rp[i, j])}) "
                         f"reads bucket {int(bucket[h, i, j])}, expected {int(buckets_for(rp, cfg)[0][i, j])} "
                         f"(the bucket of key - query).{why}")


@given(cfg=t5_bias_configs(square=True))
def test_lookup(target, cfg):
    run(target, check_lookup, cfg)


@given(cfg=t5_bias_configs(distinct_lengths=True))
def test_end_alignment(target, cfg):
    run(target, check_end_alignment, cfg)


@given(cfg=t5_bias_configs(min_heads=2))
def test_heads(target, cfg):
    run(target, check_heads, cfg)


@given(cfg=t5_bias_configs(square=True))
def test_relative_sign(target, cfg):
    run(target, check_relative_sign, cfg)
