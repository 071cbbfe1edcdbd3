"""The stateful scaled rotary module: one instance, built with a scaling rule, called with growing and
shorter sequences.

    ScaledRotaryEmbedding(dim, base=10000.0, scaling=None)      built once, in the target's worker
    forward(x (B, H, L, D), positions (L,))                     the first R dims rotated, the rest passed
        == reference/scaled_rope.py (float64)                    through; seq_len = max(positions) + 1

The dynamic rule's bug class is state: a model builds its rotary module once, and a long prompt grows
the NTK base; a module that never goes back gives every later short prompt the wrong frequencies, and
no single call shows it. So ``call_sequences`` is a Hypothesis state machine (as ``rope_module``'s):
calls at any positions, decoding steps, prompts past the original length, short prompts after them,
a call ending exactly at the original length, other dtypes; each call is checked against the float64
rotation of the frequencies its length gives (LongRoPE switches per call, by the max position, not by
the number of tokens). Whether a grown base stays until a call shorter than the original length
(Hugging Face's ``dynamic_rope_update``) or follows each call is the named convention
``dynamic_update``; the pairing is ``rope_layout``; both are measured on fresh instances. The other
properties are invariants of one call on a fresh instance: q . k depends on m - n only, the rotated
dims' norm is multiplied by exactly the attention factor, the dims past R are passed through bitwise.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule, run_state_machine_as_test

from harness.boundary.interpret import machine_examples
from harness.spec import tolerance
from harness.suites import stateful
from harness.suites.kit import run
from harness.suites.positions.helpers import module_devices
from harness.suites.rope_scaling.configs import ScaledRopeCallsConfig, module_configs
from harness.reference.rope import pair_indices
from harness.suites.rope_scaling.module_helpers import (ANGLE_ROUNDINGS, MODULE, Conventions, angle_dtype, build,
                                                        compare, forward, frequencies, probe_dtype, truth_and_naive)

PROPERTY_PREFIX = "scaled_rope_module"
pytestmark = pytest.mark.needs(MODULE)

#: calls per sequence: a grown base that stays, or a LongRoPE switch on the wrong length, shows in two
#: or three calls (tests/planted/rope_scaling/stateful_dynamic_never_resets.py is found at the CI profile)
STEPS = 10

#: the rules the state machine draws, the two with state (dynamic, longrope) half of the time
STATEFUL_FIRST = ("dynamic", "longrope") * 3 + ("default", "linear", "yarn", "llama3", "dynamic", "longrope")

_COMMON = dict(base=10000.0, seq_len=0, low_freq_factor=1.0, high_freq_factor=4.0, beta_fast=32.0, beta_slow=1.0,
               mscale=0.0, mscale_all_dim=0.0, attention_factor=0.0, truncate=True, max_pos=0, seed=3)
#: run first on every profile: dynamic NTK (a long prompt, then a short one), YaRN (an attention factor),
#: a partial LongRoPE (GPT-NeoX-style quarter rotary dims)
DYNAMIC = ScaledRopeCallsConfig(rule="dynamic", dim=64, factor=2.0, orig=64, **_COMMON)
YARN = ScaledRopeCallsConfig(rule="yarn", dim=32, factor=8.0, orig=128, **_COMMON)
PARTIAL = ScaledRopeCallsConfig(rule="longrope", dim=64, factor=4.0, orig=32, partial=0.25, **_COMMON)


class ScaledRopeModule(stateful.Module):
    """``ScaledRotaryEmbedding`` for the engine: calls ``(L, offset, dtype, device)``; the conventions
    measured once per target and configuration on fresh instances, and named."""

    name = MODULE
    stale = "a base grown for an earlier, longer call, or frequencies chosen by an earlier call's length?"

    def __init__(self, target, cfg: ScaledRopeCallsConfig):
        device = cfg.calls[0][3] if cfg.calls else target.device
        self.conventions = Conventions(target, cfg, device)

    def construct(self, cls, cfg):
        return cls(cfg.dim, base=cfg.base, scaling=cfg.scaling())

    def constructed(self, cfg) -> str:
        return cfg.constructed()

    def device_of(self, call) -> str:
        return call[3]

    def forward(self, target, mod, cfg, index: int):
        x = cfg.x(index)
        return forward(target, mod, x, cfg.positions(index)), x

    def judge(self, out, cfg, index: int) -> stateful.Verdict:
        out, x = out
        lengths = self.conventions.lengths(cfg, index)
        cmps = [compare(out, cfg, x, cfg.positions(index), n, self.conventions.layout) for n in lengths]
        if any(c.ok for c in cmps):
            return stateful.Verdict(True)
        return stateful.Verdict(False, cmps[0].describe())

    def describe(self, cfg, index: int) -> str:
        return cfg.describe(index)

    def call_text(self, c) -> str:
        return f"positions {c[1]}..{c[1] + c[0] - 1} ({c[2]}, {c[3]})"

    def expected(self, cfg, index: int) -> str:
        n = self.conventions.lengths(cfg, index)[0]
        inv, factor = frequencies(cfg, n)
        update = f", dynamic_update {self.conventions.update}" if cfg.rule == "dynamic" else ""
        return (f"the rotation with the {cfg.rule} frequencies of seq_len {n}{update} (attention factor "
                f"{factor:.6g}, {self.conventions.layout} pairs, lowest frequency {float(inv[-1]):.6g})")


def check_call_sequences(target, cfg: ScaledRopeCallsConfig):
    """One ``ScaledRotaryEmbedding`` instance, called in a sequence a Hypothesis state machine draws
    (prompts past the original length, decoding steps, short prompts after long ones, a call ending at
    the original length, other dtypes): every call equals the float64 rotation of the first R dims with
    the rule's frequencies and attention factor at the call's length (max position + 1; the dynamic
    rule's base per the named ``dynamic_update``: each call's own, or grown until a call shorter than
    the original length resets it), the rest passed through. Replays a shrunk sequence."""
    stateful.replay(target, ScaledRopeModule(target, cfg), cfg)


def machine_for(target):
    """The state machine class for ``target``: rules draw calls of the dtypes and devices it has."""
    dtypes, devices = stateful.module_dtypes(target), module_devices(target)
    precise = [d for d in ("float32", "float64") if d in dtypes] or dtypes[:1]
    # half the calls in a precise dtype: a base off by a little is within a half dtype's rounding
    dtype_draw = st.one_of(st.sampled_from(precise), st.sampled_from(dtypes))

    class ScaledRopeCalls(stateful.CallsMachine):
        @initialize(cfg=module_configs(rules=STATEFUL_FIRST))
        def start(self, cfg):
            self.begin(cfg, lambda: ScaledRopeModule(target, cfg))

        def call(self, L, end, dtype, device):
            """A call of ``L`` positions ending at ``end`` - 1 (its length for the rule: ``end``)."""
            __tracebackhide__ = True
            end = max(1, min(end, self.cfg.max_position))
            L = max(1, min(L, end))
            assume(L in target.sizes["L"] if target.sizes and "L" in target.sizes else True)
            self.add(L, end - L, dtype, device)

        def device(self):
            return self.cfg.calls[-1][3] if self.cfg.calls else devices[0]

        @rule(L=st.integers(1, 24), where=st.floats(0.0, 1.0), dtype=dtype_draw)
        def any_call(self, L, where, dtype):
            self.call(L, 1 + int(where * (self.cfg.max_position - 1)), dtype, self.device())

        @rule(L=st.integers(1, 24), past=st.one_of(st.just(1.0), st.floats(0.0, 1.0)))
        def long_prompt(self, L, past):
            """A call past the original length (a long prompt, or decoding far into one)."""
            dtype = self.last[2] if self.cfg.calls else precise[0]
            span = self.cfg.max_position - self.cfg.orig
            self.call(L, self.cfg.orig + 1 + int(past * (span - 1)), dtype, self.device())

        @precondition(lambda self: self.cfg.calls)
        @rule(L=st.integers(1, 24), short=st.one_of(st.just(0.0), st.floats(0.0, 1.0)))
        def short_prompt(self, L, short):
            """A new prompt shorter than the original length (after whatever came before), ending
            near it (its largest positions show a base that stayed grown the most)."""
            self.call(L, self.cfg.orig - 1 - int(short * (self.cfg.orig // 2)), self.last[2], self.device())

        @precondition(lambda self: self.cfg.calls)
        @rule(L=st.integers(1, 8))
        def at_original(self, L):
            """A call ending exactly at the original length."""
            self.call(L, self.cfg.orig, self.last[2], self.device())

        @precondition(lambda self: self.cfg.calls and sum(self.last[:2]) < self.cfg.max_position)
        @rule(L=st.integers(1, 3))
        def decode(self, L):
            """The next positions after the previous call (a KV-cache decoding step)."""
            L0, off0, dtype, device = self.last
            self.call(L, off0 + L0 + L, dtype, device)

        @precondition(lambda self: self.cfg.calls and len(dtypes) > 1)
        @rule(data=st.data())
        def other_dtype(self, data):
            """The same call in another dtype."""
            L0, off0, dtype0, device = self.last
            self.call(L0, off0 + L0, data.draw(st.sampled_from([d for d in dtypes if d != dtype0])), device)

        @precondition(lambda self: self.cfg.calls and len(devices) > 1)
        @rule()
        def other_device(self):
            """The module moved to the other device, then the same call there."""
            L0, off0, dtype, device0 = self.last
            self.call(L0, off0 + L0, dtype, next(d for d in devices if d != device0))

    ScaledRopeCalls.target, ScaledRopeCalls.check = target, staticmethod(check_call_sequences)
    return ScaledRopeCalls


def test_call_sequences(target):
    run_state_machine_as_test(machine_for(target),
                              settings=settings(stateful_step_count=STEPS, **machine_examples(target)))


# ---- invariants of one call on a fresh instance -------------------------------------------------------

def one_call(target, cfg: ScaledRopeCallsConfig, x: torch.Tensor, positions: torch.Tensor, measure: bool = True):
    """(the module's output on the CPU, the call's text, its conventions: None unless ``measure``) of one
    call on a fresh instance."""
    device = target.device
    conventions = Conventions(target, cfg, device, update=False) if measure else None
    out = forward(target, build(target, cfg, device), x.to(device), positions).cpu()
    text = (f"forward(x {tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}, positions "
            f"{positions.tolist()[:8]}{' ...' if positions.numel() > 8 else ''}) of {cfg.constructed()}")
    return out, text, conventions


def check_agreement(target, cfg: ScaledRopeCallsConfig):
    """One call on a fresh instance -- a prompt or a decoding step, before, at or past the original
    length -- equals the float64 rotation of the first R dims with the rule's frequencies and attention
    factor at seq_len = max(positions) + 1 (not the number of tokens: one token at position 5000 is a
    call of length 5001), the rest passed through (tolerance policy; pairing measured and named)."""
    L, offset, dtype, _ = cfg.calls[0]
    x, positions = cfg.x(0), cfg.positions(0)
    out, text, conv = one_call(target, cfg, x, positions)
    cmp = compare(out, cfg, x, positions, offset + L, conv.layout)
    if not cmp.ok:
        inv, factor = frequencies(cfg, offset + L)
        raise AssertionError(f"{text} differs from the rotation with the {cfg.rule} frequencies of seq_len "
                             f"{offset + L} (attention factor {factor:.6g}, {conv.layout} pairs): {cmp.describe()}")


@st.composite
def one_call_configs(draw, rules=("default", "linear", "dynamic", "yarn", "llama3", "longrope")):
    """A module configuration with one call: L tokens (1 .. 24: a decoding step is 1) ending before, at
    or past the original length, in a dtype of DTYPE."""
    cfg = draw(module_configs(rules=rules))
    L = draw(st.one_of(st.just(1), st.integers(1, 24)))
    end = draw(st.one_of(st.integers(cfg.orig + 1, cfg.max_position), st.just(cfg.orig), st.integers(1, cfg.orig)))
    L = min(L, end)
    return cfg.then(L, end - L, draw(st.sampled_from(["float32", "float32", "float16", "bfloat16", "float64"])), "cpu")


def _positions(cfg, draw_seed: int, pairs: int) -> tuple[torch.Tensor, int]:
    """(positions m, n, m + s, n + s, m + 2s, n + 2s, ...) below ``max_position``, and the shift s."""
    g = cfg.generator(salt=draw_seed)
    top = cfg.max_position
    s = int(torch.randint(1, top // (2 * pairs) + 1, (1,), generator=g))
    m, n = (int(v) for v in torch.randint(0, top - (pairs - 1) * s, (2,), generator=g))
    return torch.tensor([p + j * s for j in range(pairs) for p in (m, n)]), s


def check_relative(target, cfg: ScaledRopeCallsConfig):
    """For every rule, in one call, the score <out(q at m), out(k at n)> depends on m - n only: the
    same q and k at (m, n), (m + s, n + s), (m + 2s, n + 2s), ... give the same score (to twice the
    policy's allowance for each score's rounding; the attention factor squared included)."""
    pairs, dtype = 4, probe_dtype(target)
    positions, s = _positions(cfg, 11, pairs)
    g = cfg.generator(salt=12)
    qk = torch.randn(cfg.batch, cfg.heads, 2, cfg.dim, generator=g, dtype=torch.float64)
    x = qk.repeat(1, 1, pairs, 1).to(dtype)  # rows 2j: q, 2j + 1: k
    out, text, conv = one_call(target, cfg, x, positions)
    length = int(positions.max()) + 1
    inv, factor = frequencies(cfg, length)
    truth, naive = truth_and_naive(cfg, x, positions, length, conv.layout, inv, factor)

    def scores(t):
        t = t.double()
        return (t[..., 0::2, :] * t[..., 1::2, :]).sum(-1)  # (B, H, pairs)

    got, ref, nai = scores(out), scores(truth), scores(naive)
    first = got[..., :1].expand_as(got)
    # each score moves by up to att^2 (|q_a| + |q_b|)(|k_a| + |k_b|) |dt| per pair when its angles are
    # off by dt (a few u |t|, module_helpers.angle_terms); both scores of a comparison carry it
    first_dims, second_dims = pair_indices(2 * inv.numel(), conv.layout)
    q, k = (qk.abs()[..., r, :] for r in (0, 1))
    pairs_qk = (q[..., first_dims] + q[..., second_dims]) * (k[..., first_dims] + k[..., second_dims])  # (B, H, R/2)
    span = positions.double().view(pairs, 2).sum(-1)  # m + n + 2 j s
    terms = ANGLE_ROUNDINGS * factor ** 2 * (pairs_qk * inv).sum(-1, keepdim=True) * (span + span[0])
    cmp = tolerance.compare(got, first, first + 2 * (nai - ref), dtype=dtype, terms=terms,
                            terms_dtype=angle_dtype(dtype))
    if not cmp.ok:
        shifted = got - first
        j = int(shifted.abs().flatten(0, 1).max(0).values.argmax())
        raise AssertionError(f"{cfg.rule}: q . k is not a function of m - n: at positions ({int(positions[0])}, "
                             f"{int(positions[1])}) {float(got.flatten(0, 1)[0, 0]):.8g}, shifted by {j * s} "
                             f"{float(got.flatten(0, 1)[0, j]):.8g}; {cmp.describe()}\n  call: {text}")


def check_norms(target, cfg: ScaledRopeCallsConfig):
    """For every rule the rotation preserves norms: at every position, the norm of the rotated dims of
    the output is exactly the attention factor times that of the input's (the factor of the rule at
    the call's length; to the policy's allowance)."""
    dtype = probe_dtype(target)
    g = cfg.generator(salt=21)
    L = 16
    positions = torch.randint(0, cfg.max_position, (L,), generator=g)
    x = torch.randn(cfg.batch, cfg.heads, L, cfg.dim, generator=g, dtype=torch.float64).to(dtype)
    out, text, conv = one_call(target, cfg, x, positions)
    R = cfg.rotary_dim
    length = int(positions.max()) + 1
    inv, factor = frequencies(cfg, length)
    _, naive = truth_and_naive(cfg, x, positions, length, conv.layout, inv, factor)

    def norms(t):
        return t.double()[..., :R].norm(dim=-1)

    got, nai = norms(out), norms(naive)
    expected = factor * x.double()[..., :R].norm(dim=-1)
    cmp = tolerance.compare(got, expected, nai, dtype=dtype)
    if not cmp.ok:
        ratio = (got / expected.clamp_min(1e-300)).flatten()
        raise AssertionError(f"{cfg.rule}: |out[..., :{R}]| / |x[..., :{R}]| ranges {float(ratio.min()):.8g} .. "
                             f"{float(ratio.max()):.8g} over the positions, expected the attention factor "
                             f"{factor:.8g} everywhere; {cmp.describe()}\n  call: {text}")


def check_passthrough(target, cfg: ScaledRopeCallsConfig):
    """With a partial rotary factor (R = int(dim p) < dim) the dims R .. dim - 1 of the output are the
    input's, bitwise: neither rotated nor multiplied by the attention factor."""
    dtype = probe_dtype(target)
    g = cfg.generator(salt=31)
    L = 8
    positions = torch.randint(0, cfg.max_position, (L,), generator=g)
    x = torch.randn(cfg.batch, cfg.heads, L, cfg.dim, generator=g, dtype=torch.float64).to(dtype)
    out, text, _ = one_call(target, cfg, x, positions, measure=False)  # (the pairing is not this property's)
    R = cfg.rotary_dim
    moved = (out[..., R:] != x[..., R:]).any(dim=(0, 1, 2))
    if moved.any():
        dims = (moved.nonzero().flatten() + R).tolist()
        ratio = float((out[..., R:].double().norm() / x[..., R:].double().norm()))
        raise AssertionError(f"{cfg.rule} with partial_rotary_factor {cfg.partial:g}: dims {dims[:8]}"
                             f"{' ...' if len(dims) > 8 else ''} past the rotary dim {R} changed (norm ratio "
                             f"{ratio:.6g}); they must pass through untouched\n  call: {text}")
    assert math.isfinite(float(out.double().abs().max())), f"non-finite output\n  call: {text}"


@example(cfg=PARTIAL.then(1, 100, "float32", "cpu"))
@example(cfg=DYNAMIC.then(24, 200, "float32", "cpu"))
@given(cfg=one_call_configs())
def test_agreement(target, cfg):
    run(target, check_agreement, cfg)


@example(cfg=YARN)
@example(cfg=DYNAMIC)
@given(cfg=module_configs())
def test_relative(target, cfg):
    run(target, check_relative, cfg)


@example(cfg=YARN)
@given(cfg=module_configs())
def test_norms(target, cfg):
    run(target, check_norms, cfg)


@example(cfg=PARTIAL)
@given(cfg=module_configs(partial=True))
def test_passthrough(target, cfg):
    run(target, check_passthrough, cfg)
