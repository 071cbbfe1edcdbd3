"""The stateful rotary module: one instance, called again and again, equals the stateless rotation.

    RotaryEmbedding(dim, base=10000.0)         built once, in the target's worker, and kept
    forward(x (B, H, L, D), offset=0)          x rotated at positions offset .. offset + L - 1
        == apply_rotary_embedding(x, offset + arange(L), base)   (reference/rope.py, float64)

Libraries cache the cos/sin (or angle) table between calls, keyed on the length, the offset,
the dtype and the device; a key that misses one of them returns another call's table:
rotary-embedding-torch 0.2.6 keyed on the length only (a second call at another offset got the
first one's positions), 0.8.2 wrote the table of a call at offset o into the rows for positions
0 .. L - 1 (the next call from position 0 read positions o ..). No single call shows such a bug;
a sequence does. So the property is a Hypothesis state machine
(``hypothesis.stateful.RuleBasedStateMachine``): it builds the module once, then draws calls
(any length and offset, a decode step after the previous call, a longer call at the same offset,
the same length at another offset, a restart from position 0 after an offset, the same call in another dtype, a move to another device
where there are two), and checks every call against the float64 rotation with the tolerance
policy. The pairing is a named convention (``rope_layout``), measured once per sequence on fresh
instances. A failure reports the shrunk sequence as the configuration (``RopeCallsConfig.calls``)
and the repro line replays it, call by call, on a fresh instance.

Positions stay below 256 (``MAX_POSITION``): exact integers in every dtype, so what fails here is
the state, not the precision of large positions (rope.long_context's business).
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule, run_state_machine_as_test

from harness.spec import tolerance
from harness.boundary import guard
from harness.suites import stateful
from harness.suites.kit import SEED, ImplementationError, check_convention, expect_tensor, impl, is_module, move, record_label
from harness.spec.configs import DTYPES
from harness.suites.positions.configs import BASE, EVEN_DIM
from harness.suites.positions.configs import MAX_POSITION, RopeCallsConfig
from harness.suites.positions.helpers import PROBE_POSITIONS, layout_of, module_devices, rope_naive, rope_truth
from harness.boundary.interpret import machine_examples

PROPERTY_PREFIX = "rope_module"
MODULE = "RotaryEmbedding"
pytestmark = pytest.mark.needs(MODULE)

#: calls per sequence; with the profile's examples (30 in CI) every planted cache bug is found
#: (tests/test_planted_stateful.py), and a failing sequence shrinks to two or three calls
STEPS = 12


def build(target, D: int, base: float, device: str):
    """A fresh ``RotaryEmbedding(D, base=base)`` (a handle in the worker), moved to ``device``."""
    mod = impl(target, MODULE)(D, base=base)
    if not is_module(mod):
        raise ImplementationError(f"{MODULE}({D}, base={base:g}) returned {type(mod).__name__}, "
                                  f"expected an nn.Module")
    return move(target, mod, MODULE, device=device)


def forward(target, mod, x: torch.Tensor, offset: int) -> torch.Tensor:
    out = guard.call(target.limit, mod, f"{MODULE}.forward", x, offset=offset)
    return expect_tensor(out, f"{MODULE}.forward", tuple(x.shape), x.dtype, x.device)


def measure_layout(target, D: int, base: float, device: str) -> tuple[str | None, str]:
    """Which dims the module rotates together: each basis vector e_j (as batch item j, L = 1)
    rotated to each probe position by a fresh instance's first call (float32 unless the target
    declares dtypes without it). Returns (layout or None, evidence), as the rope suite's probe."""
    supported = target.dtypes or ("float32",)
    dtype = DTYPES["float32" if "float32" in supported else supported[0]]
    eye = torch.eye(D, dtype=dtype, device=device)[:, None, None, :]  # (D, 1, 1, D)
    support = torch.zeros(D, D, dtype=torch.bool)
    for p in PROBE_POSITIONS:
        img = forward(target, build(target, D, base, device), eye, p).double().cpu()[:, 0, 0]  # (D, D)
        support |= img.abs() > 1e-9
    return layout_of(target, support, f"offsets {PROBE_POSITIONS}, one fresh instance each")


class RopeModule(stateful.Module):
    """``RotaryEmbedding`` for the engine: calls ``(L, offset, dtype, device)``; the pairing
    (``rope_layout``) measured once per target and size on fresh instances, and named."""

    name = MODULE
    stale = "a cached table keyed on too little: length, offset, dtype or device?"

    def __init__(self, target, cfg: RopeCallsConfig):
        device = cfg.calls[0][3] if cfg.calls else target.device
        measured = target.measured  # measured once per target
        key = ("rope_module.layout", cfg.D, cfg.base, device)
        if key not in measured:
            measured[key] = measure_layout(target, cfg.D, cfg.base, device)
        layout, evidence = measured[key]
        record_label(target, check_convention("rope_layout", layout, target.conventions, evidence))
        self.layout = layout

    def construct(self, cls, cfg):
        return cls(cfg.D, base=cfg.base)

    def constructed(self, cfg) -> str:
        return f"{MODULE}({cfg.D}, base={cfg.base:g})"

    def device_of(self, call) -> str:
        return call[3]

    def forward(self, target, mod, cfg, index: int):
        x = cfg.x(index)
        return forward(target, mod, x, cfg.calls[index][1]), x

    def judge(self, out, cfg, index: int) -> stateful.Verdict:
        out, x = out
        positions = cfg.positions(index)
        cmp = tolerance.compare(out, rope_truth(x, positions, cfg.base, self.layout),
                                rope_naive(x, positions, cfg.base, self.layout), dtype=x.dtype)
        return stateful.Verdict(cmp.ok, cmp.describe())

    def describe(self, cfg, index: int) -> str:
        return cfg.describe(index)

    def call_text(self, c) -> str:
        return f"L={c[0]}, offset={c[1]}, {c[2]}, {c[3]}"

    def expected(self, cfg, index: int) -> str:
        L, offset = cfg.calls[index][:2]
        return (f"the stateless rotation at positions {offset}..{offset + L - 1} "
                f"({self.layout} pairs, base={cfg.base:g})")


def check_call_sequences(target, cfg: RopeCallsConfig):
    """One ``RotaryEmbedding`` instance, called in a sequence a Hypothesis state machine draws: every call,
    made in order on the ONE instance built first, equals the float64 rotation at positions offset ..
    offset + L - 1 (tolerance policy; pairing measured and named). Replays a shrunk sequence (the repro
    line)."""
    stateful.replay(target, RopeModule(target, cfg), cfg)


_LENGTH = st.one_of(st.integers(1, 8), st.integers(9, 40))
_OFFSET = st.one_of(st.just(0), st.integers(1, 64), st.integers(65, MAX_POSITION - 1))


def machine_for(target):
    """The state machine class for ``target``: rules draw calls of the dtypes and devices it has."""
    dtypes, devices = stateful.module_dtypes(target), module_devices(target)

    class RopeModuleCalls(stateful.CallsMachine):
        @initialize(D=EVEN_DIM, base=BASE, batch=st.integers(1, 2), heads=st.integers(1, 2), seed=SEED)
        def start(self, D, base, batch, heads, seed):
            cfg = RopeCallsConfig(D=D, base=base, batch=batch, heads=heads, seed=seed)
            self.begin(cfg, lambda: RopeModule(target, cfg))

        def call(self, L, offset, dtype, device):
            __tracebackhide__ = True
            L = max(1, min(L, MAX_POSITION))
            assume(L in target.sizes["L"] if target.sizes and "L" in target.sizes else True)
            self.add(L, min(offset, MAX_POSITION - L), dtype, device)

        @rule(L=_LENGTH, offset=_OFFSET, dtype=st.sampled_from(dtypes))
        def any_call(self, L, offset, dtype):
            self.call(L, offset, dtype, self.session.device)

        @precondition(lambda self: self.cfg.calls and sum(self.last[:2]) < MAX_POSITION)
        @rule(L=st.integers(1, 3))
        def decode(self, L):
            """The next positions after the previous call (a KV-cache decoding step)."""
            L0, off0, dtype, device = self.last
            self.call(L, off0 + L0, dtype, device)

        @precondition(lambda self: self.cfg.calls and sum(self.last[:2]) < MAX_POSITION)
        @rule(extra=st.integers(1, 16))
        def longer(self, extra):
            """A longer call at the same offset."""
            L0, off0, dtype, device = self.last
            self.call(min(L0 + extra, MAX_POSITION - off0), off0, dtype, device)

        @precondition(lambda self: self.cfg.calls and self.last[0] < MAX_POSITION)
        @rule(step=st.integers(1, MAX_POSITION))
        def shifted(self, step):
            """The same length at another offset."""
            L0, off0, dtype, device = self.last
            self.call(L0, (off0 + step) % (MAX_POSITION - L0 + 1), dtype, device)

        @precondition(lambda self: self.cfg.calls and self.last[1] > 0)
        @rule(L=_LENGTH)
        def restart(self, L):
            """A new sequence from position 0 after calls at an offset (a new prompt)."""
            _, _, dtype, device = self.last
            self.call(L, 0, dtype, device)

        @precondition(lambda self: self.cfg.calls and len(dtypes) > 1)
        @rule(data=st.data())
        def other_dtype(self, data):
            """The same call in another dtype."""
            L0, off0, dtype0, device = self.last
            self.call(L0, off0, data.draw(st.sampled_from([d for d in dtypes if d != dtype0])), device)

        @precondition(lambda self: self.cfg.calls and len(devices) > 1)
        @rule()
        def other_device(self):
            """The module moved to the other device, then the same call there."""
            L0, off0, dtype, device0 = self.last
            self.call(L0, off0, dtype, next(d for d in devices if d != device0))

    RopeModuleCalls.target, RopeModuleCalls.check = target, staticmethod(check_call_sequences)
    return RopeModuleCalls


def test_call_sequences(target):
    run_state_machine_as_test(machine_for(target),
                              settings=settings(stateful_step_count=STEPS, **machine_examples(target)))
