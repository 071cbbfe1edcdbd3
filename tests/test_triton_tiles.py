"""The reference Triton kernels' tiles (``reference.triton.flash_attention.tiles``): rows by head
dims and dtype, so the compiled kernels fit a GPU block.

The first H200 run found the fixed 64-row tiles too big for wide heads: ``attention_with_kvcache``
float16 with (E, Ev) = (256, 192) ran out of shared memory, float32 head dim 160 (padded to 256)
did not compile and run within 20 s. Every (BE, BEV, dtype) is checked here against the rule's
bounds (this part needs no GPU: it is the host-side arithmetic the compiled launch gets), and
the kernels are run under Triton's interpreter at wide heads, where the small tiles are picked
and must still agree with torch's SDPA over several blocks.

Why ``HARNESS_TILES`` stays ``(64,)`` though 16 and 32 are used too: ``harness.boundary.interpret.fit``
maps each long regime length to the class of one declared tile, cycling through them
(``shrink``: tile ``tiles[(value // 64) % len(tiles)]``). With (16, 32, 64), 257 -> 65, 1023 -> 31,
203 -> 25, 1025 -> 65: lengths inside one or two blocks of the 64-row tiles that every head dim up
to 64 (float32; 128 in float16) uses, and the smoke tier's first attention example (129, 257)
becomes (129, 65), one key in the second block, where an online softmax that never rescales
passes. The lengths of T = 64 (63, 64, 65, 127, 129, odd ones in (65, 127)) are boundaries of the
32- and 16-row tiles as well (64 = 2 x 32 = 4 x 16) and cross 3 to 9 of their blocks, and the
regimes' explicit examples have head dims up to 256, so the small tiles are exercised over
several blocks (``test_fit_lengths_cross_every_tile``, ``test_the_regimes_run_every_tile``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from harness.basics import optional
from harness.boundary import interpret

#: without triton every test skips with the install command, or fails under $HARNESS_REQUIRE_TRITON
pytestmark = pytest.mark.optional_libs("triton")

if not optional.missing("triton"):  # (collected either way; the mark decides)
    from harness.reference.triton import flash_attention as fa
    from harness.reference.triton import kvcache

DIMS = (16, 32, 64, 128, 256)
DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
KIB = 1024


def _size(dtype):
    return torch.empty((), dtype=dtype).element_size()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_every_tile_fits_the_budget(dtype, backward):
    b, acc = _size(dtype), 8 if dtype == torch.float64 else 4
    over = []
    for BE in DIMS:
        for BEV in DIMS:
            m, n, warps, stages = fa.tiles(BE, BEV, dtype, backward)
            row = (BE + BEV) * b
            assert m == n and m in (16, 32, 64), (BE, BEV, m, n)
            assert warps == (4 if m == 64 else 8) and stages in ((1, 2, 3) if m == 64 else (1, 2))
            if not backward:  # the row rule itself
                assert m == (64 if row <= 512 else 32 if row <= 1024 else 16), (BE, BEV, m)
            assert m * BE * b <= 32 * KIB and m * BEV * b <= 32 * KIB, (BE, BEV, m)  # register tiles
            assert m * BEV * acc <= 32 * KIB, (BE, BEV, m)  # the accumulator
            if backward:
                assert m == 16 or m * (BE + BEV) * acc <= 32 * KIB, (BE, BEV, m)  # dK, dV
            shared = fa.shared_bytes(m, BE, BEV, b, stages, backward)
            assert shared == (m * (BE + BEV + stages * (BE + 2 * BEV)) * b if backward
                              else (m * BE + stages * n * (BE + BEV)) * b)
            if shared > fa.SHARED_BUDGET:
                over.append((BE, BEV))
                assert (m, stages) == (16, 1) and shared <= 160 * KIB, (BE, BEV, m, stages, shared)
            # the largest stage count that fits is taken
            more = stages + 1 if stages < (3 if m == 64 else 2) else None
            if more and shared <= fa.SHARED_BUDGET:
                assert fa.shared_bytes(m, BE, BEV, b, more, backward) > fa.SHARED_BUDGET, (BE, BEV, m, stages)
    # over the budget: only float64's backward at 256-wide values (documented in the module doc)
    expected = [(BE, BEV) for BE in DIMS for BEV in DIMS if BEV == 256 or (BE, BEV) == (256, 128)]
    assert over == (expected if backward and dtype == torch.float64 else []), over


def test_small_heads_keep_64_rows():
    for dtype in DTYPES:
        assert fa.tiles(16, 16, dtype)[:2] == (64, 64)
    assert fa.tiles(128, 128, torch.float16)[:2] == (64, 64)
    assert fa.tiles(64, 64, torch.float32)[:2] == (64, 64)


def test_the_h200_failures_get_small_tiles():
    """The shapes of the first GPU run's failures."""
    assert fa.tiles(256, 256, torch.float16)[:2] == (32, 32)  # kvcache (256, 192) float16: out of shared memory
    assert fa.tiles(256, 256, torch.float32)[:2] == (16, 16)  # SDPA float32 head dim 160: timed out
    assert fa.tiles(256, 256, torch.float32, backward=True)[:2] == (16, 16)
    assert fa.tiles(256, 256, torch.float64)[:2] == (16, 16)


def test_fit_lengths_cross_every_tile():
    """The declared tile is the largest; its boundary lengths are boundaries of every tile used."""
    assert fa.HARNESS_TILES == kvcache.HARNESS_TILES == (64,)
    for value in (63, 64, 65, 127, 128, 129, 257, 513, 1023, 1024, 1025, 2048, 203, 239):
        fitted = interpret.shrink(value, fa.HARNESS_TILES)
        assert fitted <= 129
        for rows in (16, 32, 64):
            if value % 64 in (63, 0, 1):  # a boundary stays a boundary of every tile
                assert fitted % rows in (rows - 1, 0, 1), (value, fitted, rows)
    assert interpret.shrink(257, (64,)) == 129 and -(-129 // 16) == 9


#: run under the interpreter in a fresh process (``TRITON_INTERPRET`` is read when a kernel is
#: defined): each kernel launch's tiles recorded, outputs and gradients against torch's SDPA
PROBE = r"""
import json, sys, torch
import torch.nn.functional as F
from harness.reference.triton import flash_attention as fa, kvcache

seen = []
for name in ("_fwd", "_bwd_dkdv", "_bwd_dq"):
    kern = getattr(fa, name)
    def run(*a, _k=kern, _n=name, _run=kern.run, **kw):
        seen.append((_n, kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"], kw["num_stages"]))
        return _run(*a, **kw)
    kern.run = run
dec = kvcache._decode
def run_decode(*a, _run=dec.run, **kw):
    seen.append(("_decode", kw["BLOCK_M"], kw["BLOCK_N"], kw["num_warps"], kw["num_stages"]))
    return _run(*a, **kw)
dec.run = run_decode

out = {}
torch.manual_seed(0)
for label, E, Ev, dtype, L, S in (("fp32_256", 256, 256, torch.float32, 33, 40),
                                  ("fp64_256", 256, 256, torch.float64, 33, 40),
                                  ("fp16_160", 160, 160, torch.float16, 35, 47)):
    q = torch.randn(1, 2, L, E, dtype=dtype, requires_grad=True)
    k = torch.randn(1, 2, S, E, dtype=dtype, requires_grad=True)
    v = torch.randn(1, 2, S, Ev, dtype=dtype, requires_grad=True)
    seen.clear()
    o = fa.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = torch.randn_like(o)
    grads = torch.autograd.grad(o, (q, k, v), g)
    ref_in = [t.detach().double().requires_grad_() for t in (q, k, v)]
    # bottom-right causal (the kernel's convention): query i sees keys j <= i + S - L
    mask = torch.ones(L, S, dtype=torch.bool).tril(S - L)
    ref = F.scaled_dot_product_attention(*ref_in, attn_mask=mask)
    ref_grads = torch.autograd.grad(ref, ref_in, g.double())
    out[label] = dict(tiles=list(seen), out=float((o.double() - ref).abs().max()),
                      grad=max(float((a.double() - b).abs().max()) for a, b in zip(grads, ref_grads)))

# the H200's out-of-resources call: float16 q (1, 6, 64, 256), caches (1, 1, 65, 256) / (1, 1, 65, 192)
q = torch.randn(1, 6, 64, 256, dtype=torch.float16)
kc = torch.randn(1, 1, 65, 256, dtype=torch.float16)
vc = torch.randn(1, 1, 65, 192, dtype=torch.float16)
seen.clear()
o = kvcache.attention_with_kvcache(q, kc, vc, cache_seqlens=65, causal=True)
qd, kd, vd = (t.double() for t in (q, kc.expand(1, 6, 65, 256), vc.expand(1, 6, 65, 192)))
mask = torch.ones(64, 65, dtype=torch.bool).tril(1)
ref = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=mask)
out["kvcache_fp16_256_192"] = dict(tiles=list(seen), out=float((o.double() - ref).abs().max()), grad=0.0)
print(json.dumps(out))
"""


def test_wide_heads_run_small_tiles_and_match_sdpa():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    expected = {  # (kernel, BLOCK_M, BLOCK_N, num_warps, num_stages) per launch
        "fp32_256": [["_fwd", 16, 16, 8, 2], ["_bwd_dkdv", 16, 16, 8, 1], ["_bwd_dq", 16, 16, 8, 1]],
        "fp64_256": [["_fwd", 16, 16, 8, 1], ["_bwd_dkdv", 16, 16, 8, 1], ["_bwd_dq", 16, 16, 8, 1]],
        "fp16_160": [["_fwd", 32, 32, 8, 2], ["_bwd_dkdv", 16, 16, 8, 2], ["_bwd_dq", 16, 16, 8, 2]],
        "kvcache_fp16_256_192": [["_decode", 32, 32, 8, 2]],
    }
    tolerance = {"fp32_256": 1e-4, "fp64_256": 1e-10, "fp16_160": 2e-2, "kvcache_fp16_256_192": 2e-2}
    for label, want in expected.items():
        assert got[label]["tiles"] == want, (label, got[label]["tiles"])
        assert got[label]["out"] < tolerance[label], (label, got[label])
        assert got[label]["grad"] < 10 * tolerance[label], (label, got[label])


def test_the_regimes_run_every_tile():
    """The interpreted profile's explicit examples (``suites.regimes``, run first within its budget)
    reach every row count the kernels pick, forward and backward, over several blocks."""
    from harness.suites import regimes
    dtypes = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
              "float64": torch.float64}

    def rows(configs, backward):
        got = set()
        for c in configs[:interpret.budget()]:
            f = interpret.fit(c, fa.HARNESS_TILES)
            m = fa.tiles(fa._pad(c.E), fa._pad(c.Ev), dtypes[c.dtype], backward)[0]
            if max(f.L, f.S) > 2 * m:  # three blocks or more on the longer side
                got.add(m)
        return got

    assert rows(regimes.AGREEMENT, False) == {16, 32, 64}
    assert rows(regimes.GRAD, True) >= {16, 64}
