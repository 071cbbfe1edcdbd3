"""Cached bias modules called again and again: the state machine that ``test_alibi_module`` and
``test_t5_bias_module`` share (on the engine of every stateful module, ``suites/stateful.py``).

    Module(...)                      built ONCE, in the target's worker (``Spec.build``), and kept
    forward(query_len, key_len)      (H, Lq, Lk): the last Lq queries over Lk keys
        == the stateless bias (``Spec.judge``), whatever calls came before it

Libraries keep the bias of the longest call and slice it for later ones (x-transformers'
``AlibiPositionalBias``); a cache is right only if the slice is: rows are queries aligned to the
END of the keys, so a cache built for (Lq0, Lk0) serves (Lq, Lk) with rows ``-Lq:`` and columns
``-Lk:`` (ALiBi depends on key - query only). x-transformers up to 1.22.16 sliced ``[:Lq, :Lk]``:
right for the first call, wrong for a decoding step after a longer prefill. No single call
shows it; a sequence does. The machine draws calls (any lengths, a prefill, a decoding step, fewer
or more queries over the same keys, fewer or more keys, a training step that changes a learned
table, a move to another device where there are two) and checks each against the float64 bias.
A failure reports the shrunk sequence (``BiasCallsConfig.calls``) and the suite's repro line replays
it, call by call, on a fresh instance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule, run_state_machine_as_test

from harness.boundary import guard, module_tensors
from harness.suites import stateful
from harness.suites.kit import SEED, ImplementationError, on_target
from harness.boundary.interpret import machine_examples
from harness.suites.positions.configs import MAX_KEYS, BiasCallsConfig
from harness.suites.positions.helpers import expect_floating, module_devices
from harness.suites.stateful import CallsMachine, Verdict

#: calls per sequence; with the profile's examples (30 in CI) every planted cache bug is found
#: (tests/test_planted_bias_modules.py) and a failing sequence shrinks to two or three calls
STEPS = 12

@dataclass(frozen=True)
class Spec:
    """One cached bias module of the protocol.

    ``build(constructor, cfg)``: a fresh instance; ``judge(out, dtype, cfg, Lq, Lk, table)``: a
    ``Verdict`` for the output (float64 CPU (H, Lq, Lk), of that dtype; ``table`` the float32 table the
    call must read, or None);
    ``configs``: the strategy of the module's own arguments (a partial ``BiasCallsConfig``);
    ``learned``: the module has a table the harness rewrites between calls (a training step)."""

    name: str
    build: Callable[[Any, BiasCallsConfig], Any]
    judge: Callable[..., Verdict]
    configs: st.SearchStrategy
    learned: bool = False


class BiasModule(stateful.Module):
    """A cached bias module for the engine: calls ``(Lq, Lk, device, table version)``."""

    stale = "a cached bias sliced from the wrong end, or kept after the table changed?"
    initial = 0

    def __init__(self, spec: Spec):
        self.spec, self.name = spec, spec.name

    def construct(self, cls, cfg):
        return self.spec.build(cls, cfg)

    def device_of(self, call) -> str:
        return call[2]

    def state_of(self, call) -> int:
        return call[3]

    def set_state(self, target, mod, cfg, state) -> None:
        if self.spec.learned:  # the learned table (T5RelativePositionBias): where module_tensors reads it
            on_target(target, module_tensors.write, mod, self.name, "table", cfg.table(state))

    def forward(self, target, mod, cfg, index: int) -> tuple[torch.Tensor, torch.dtype]:
        Lq, Lk, device, _ = cfg.calls[index]
        out = guard.call(target.limit, mod, f"{self.name}.forward", Lq, Lk)
        got = expect_floating(out, f"{self.name}.forward", (cfg.heads, Lq, Lk))
        if out.device.type != torch.device(device).type:
            raise ImplementationError(f"{self.name}.forward returned a tensor on {out.device}, "
                                      f"the module is on {device}")
        return got.double(), got.dtype

    def judge(self, out: tuple[torch.Tensor, torch.dtype], cfg, index: int) -> Verdict:
        Lq, Lk, _, version = cfg.calls[index]
        return self.spec.judge(*out, cfg, Lq, Lk, cfg.table(version) if self.spec.learned else None)

    def describe(self, cfg, index: int) -> str:
        return cfg.describe(index, self.name)

    def call_text(self, c) -> str:
        return f"({c[0]}, {c[1]}) on {c[2]}" + (f", table {c[3]}" if c[3] else "")

    def expected(self, cfg, index: int) -> str:
        Lq, Lk = cfg.calls[index][:2]
        return f"the stateless bias (the last {Lq} queries over {Lk} keys)"


def replay(target, spec: Spec, cfg: BiasCallsConfig) -> None:
    """Every call of the sequence, in order on ONE instance built first, equals the stateless
    bias. (The suites' check: replays a shrunk sequence for the repro line.)"""
    stateful.replay(target, BiasModule(spec), cfg)


_KEYS = st.one_of(st.integers(1, 16), st.integers(17, MAX_KEYS))


def machine_for(target, spec: Spec, check: Callable):
    """The state machine class for ``target``'s ``spec.name`` (``check``: the suite's replay)."""
    devices = module_devices(target)

    class BiasModuleCalls(CallsMachine):
        @initialize(cfg=spec.configs, seed=SEED)
        def start(self, cfg, seed):
            self.version = 0
            self.begin(BiasCallsConfig(**{**cfg, "seed": seed}), lambda: BiasModule(spec))

        def call(self, Lq, Lk, device=None, version=None):
            __tracebackhide__ = True
            Lk = max(1, min(Lk, MAX_KEYS))
            Lq = max(1, min(Lq, Lk))
            device = device or (self.last[2] if self.cfg.calls else self.session.device)
            self.add(Lq, Lk, device, self.version if version is None else version)

        @rule(Lk=_KEYS, data=st.data())
        def any_call(self, Lk, data):
            self.call(data.draw(st.integers(1, min(Lk, MAX_KEYS)), label="Lq"), Lk)

        @rule(L=_KEYS)
        def prefill(self, L):
            """Lq = Lk: a whole prompt."""
            self.call(L, L)

        @precondition(lambda self: self.cfg.calls and self.last[1] < MAX_KEYS)
        @rule(Lq=st.integers(1, 3))
        def decode(self, Lq):
            """The next query (or few) over every key so far: a KV-cache decoding step."""
            self.call(Lq, self.last[1] + Lq)

        @precondition(lambda self: self.cfg.calls and self.last[0] > 1)
        @rule(data=st.data())
        def fewer_queries(self, data):
            """The same keys, the last few queries only."""
            self.call(data.draw(st.integers(1, self.last[0] - 1), label="Lq"), self.last[1])

        @precondition(lambda self: self.cfg.calls and self.last[0] < self.last[1])
        @rule(data=st.data())
        def more_queries(self, data):
            """The same keys, more queries."""
            self.call(data.draw(st.integers(self.last[0] + 1, self.last[1]), label="Lq"), self.last[1])

        @precondition(lambda self: self.cfg.calls and self.last[1] > 1)
        @rule(data=st.data())
        def fewer_keys(self, data):
            """A shorter context than the last call's (a new, shorter prompt)."""
            Lk = data.draw(st.integers(1, self.last[1] - 1), label="Lk")
            self.call(min(self.last[0], Lk), Lk)

        @precondition(lambda self: self.cfg.calls and self.last[1] < MAX_KEYS)
        @rule(extra=st.integers(1, 24))
        def more_keys(self, extra):
            """The same queries over a longer context."""
            self.call(self.last[0], self.last[1] + extra)

        @precondition(lambda self: spec.learned and self.cfg.calls)
        @rule()
        def train_step(self):
            """The learned table changes (an optimizer step), then the same call."""
            self.version += 1
            self.call(self.last[0], self.last[1])

        @precondition(lambda self: self.cfg.calls and len(devices) > 1)
        @rule()
        def other_device(self):
            """The module moved to the other device, then the same call there."""
            self.call(self.last[0], self.last[1], next(d for d in devices if d != self.last[2]))

    BiasModuleCalls.target, BiasModuleCalls.check = target, staticmethod(check)
    return BiasModuleCalls


def run_machine(target, spec: Spec, check: Callable) -> None:
    run_state_machine_as_test(machine_for(target, spec, check),
                              settings=settings(stateful_step_count=STEPS, **machine_examples(target)))
