"""A failure found on a tile-boundary example is shrunk (``suites/boundary.py``): Hypothesis never
shrinks an explicit example, so ``rope.agreement`` reported the fixed example (L = 65, D = 224)
where the README promises the smallest counterexample (issue 41). The failure now names the
smallest configuration of the same kind that still fails, or says "boundary example, not shrunk".
"""
from __future__ import annotations

import dataclasses

from harness.runner import PropertyFailure
from harness.suites import boundary, regimes
from harness.suites.attention.configs import AttnConfig, VarlenConfig, WindowConfig
from harness.suites.kvcache import configs as kvc
from harness.suites.norms.configs import NormConfig
from harness.suites.positions.configs import RopeConfig
from planted_support import run_suite


def failure(cfg, kind="property violated") -> PropertyFailure:
    return PropertyFailure("fam.prop", kind, "t.py", f"wrong at {cfg}", str(cfg), f"repro {cfg.to_json()}")


def replaying(fails):
    """A replay that fails (as a PropertyFailure) where ``fails(cfg)``; records what it was given."""
    seen = []

    def replay(cfg):
        seen.append(cfg)
        return failure(cfg) if fails(cfg) else None
    replay.seen = seen
    return replay


def test_a_size_shrinks_to_the_boundary_where_the_failure_starts():
    """A kernel right below 128 head dims and wrong past them: the smallest failing D is 130 (even),
    the other sizes go to their lowest (L = 2: position 0 is no rotation)."""
    cfg = regimes.ROPE[1]  # L = 129, D = 160, 2 heads
    replay = replaying(lambda c: c.D > 128 and c.L >= 2)
    small, found, tries, stopped = boundary.shrink(cfg, failure(cfg), replay)
    assert (small.L, small.D, small.heads, small.batch) == (2, 130, 1, 1), small
    assert dataclasses.replace(small, L=cfg.L, D=cfg.D, heads=cfg.heads) == cfg  # dtype, seed, offsets kept
    assert found.config == str(small) and not stopped and tries == len(replay.seen) <= boundary.MAX_TRIES
    assert all(c.D % 2 == 0 and c.D >= 4 for c in replay.seen)  # RoPE head dims stay even, from 4


def test_orders_groups_and_minimums_are_kept():
    """L < S stays L < S, equal sizes shrink together, hq / hkv keeps its group, a window below L
    stays below it, zero-length sequences stay, a norm keeps 2 features and tokens."""
    always = replaying(lambda c: True)
    small = boundary.shrink(regimes.CAUSAL[1], failure(regimes.CAUSAL[1]), always)[0]  # L = 129 < S = 513
    assert (small.L, small.S) == (1, 2)
    small = boundary.shrink(regimes.CAUSAL[0], failure(regimes.CAUSAL[0]), always)[0]  # L = S = 257
    assert small.L == small.S == 1
    gqa = AttnConfig(batch=(1,), hq=32, hkv=4, L=65, S=129, E=64, Ev=64, dtype="float32", seed=1)
    small = boundary.shrink(gqa, failure(gqa), always)[0]
    assert (small.hq, small.hkv, small.E, small.Ev) == (8, 1, 1, 1)
    window = WindowConfig(batch=(1,), hq=1, hkv=1, L=257, S=257, E=16, Ev=16, dtype="float32", seed=1, window=63)
    small = boundary.shrink(window, failure(window), always)[0]
    assert small.window < small.L == small.S and small.window == 1, small
    zero = VarlenConfig(q_lens=(0, 129, 0, 64), k_lens=(0, 129, 0, 64), hq=1, hkv=1, E=16, Ev=16,
                        dtype="float32", seed=1, causal=True)
    small = boundary.shrink(zero, failure(zero), always)[0]
    assert small.q_lens == small.k_lens == (0, 1, 0, 1)
    norm = NormConfig(lead=(3,), normalized_shape=(4097,), dtype="bfloat16", eps=1e-5, affine=True,
                      log2_scale=0, seed=1)
    small = boundary.shrink(norm, failure(norm), always)[0]
    assert small.lead == (2,) and small.normalized_shape == (2,), small


def test_only_a_failure_of_the_same_kind_counts():
    cfg = regimes.ROPE[1]

    def replay(c):  # smaller ones crash instead: another failure, not a smaller counterexample of this one
        return failure(c, "implementation error")
    small, _, tries, _ = boundary.shrink(cfg, failure(cfg), replay)
    assert small == cfg and tries > 0


def test_the_report_says_shrunk_from_which_example_or_not_shrunk():
    cfg = regimes.ROPE[1]
    shrunk = boundary.boundary_failure(cfg, failure(cfg), replaying(lambda c: c.D > 128))
    assert isinstance(shrunk, PropertyFailure) and '"D":130' in shrunk.repro  # the smallest one's failure
    assert shrunk.message.startswith("wrong at RopeConfig(batch=1, heads=1, L=1, D=130")
    assert f"shrunk from the boundary example {cfg} (suites/regimes.py)" in str(shrunk)
    kept = boundary.boundary_failure(cfg, failure(cfg), replaying(lambda c: c == cfg))
    assert kept.config == str(cfg) and "boundary example (suites/regimes.py), not shrunk: no smaller" in str(kept)
    paged = kvc.PAGED[0]  # a type with no sizes here: labelled, never replayed
    replay = replaying(lambda c: True)
    labelled = boundary.boundary_failure(paged, failure(paged), replay)
    assert "not shrunk: KVCacheConfig has no sizes to shrink here" in str(labelled) and not replay.seen
    # a function that hung is refused from then on: a replay would "fail" anywhere, so none is tried
    hung = boundary.boundary_failure(cfg, failure(cfg), None, why_not="a call ran past the per-call limit")
    assert hung.config == str(cfg) and "not shrunk: a call ran past the per-call limit" in str(hung)


def test_the_search_stops_at_its_budget(monkeypatch):
    monkeypatch.setattr(boundary, "MAX_TRIES", 3)
    cfg = regimes.ROPE[0]
    small, _, tries, stopped = boundary.shrink(cfg, failure(cfg), replaying(lambda c: True))
    assert tries == 3 and stopped and small.L < cfg.L
    assert "stopped at its budget" in str(boundary.boundary_failure(cfg, failure(cfg), replaying(lambda c: True)))


#: past 128 head dims its frequency index restarts (a kernel that tiles D by 128 and indexes each tile
#: from 0): right on every drawn configuration (D <= 128), wrong on the boundary examples past 128
RESTARTS_PAST_128 = '''
import torch


def apply_rotary_embedding(x, positions, base=10000.0):
    D = x.shape[-1]
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    i = torch.arange(D // 2, dtype=dtype) % 64  # BUG: should be arange(D // 2)
    inv_freq = 1.0 / (base ** (2 * i / D))
    ang = positions.to(dtype)[..., None] * inv_freq
    if ang.dim() == 3:
        ang = ang[:, None]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
'''


def test_a_boundary_failure_reports_the_smallest_configuration_that_fails(pytester, tmp_path):
    target = tmp_path / "rope_tiles_of_128.py"
    target.write_text(RESTARTS_PAST_128)
    result = run_suite(pytester, ["test_rope.py"], [target], "test_agreement")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "[rope.agreement]" in out
    assert f"shrunk from the boundary example {regimes.ROPE[1]} (suites/regimes.py)" in out, out[-3000:]
    repro = out.split("repro:", 1)[1].splitlines()[0]
    assert '"batch":1,"heads":1,"L":2,"D":130' in repro, repro
