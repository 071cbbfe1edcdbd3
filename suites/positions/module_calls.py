"""Cached bias modules called again and again: the state machine that ``test_alibi_module`` and
``test_t5_bias_module`` share.

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
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from harness import guard, module_tensors
from suites.kit import SEED, ImplementationError, impl, is_module, on_target, within_declarations
from suites.positions.configs import MAX_KEYS, BiasCallsConfig
from suites.positions.helpers import expect_floating, guarded_step, module_devices, seed_sequence

#: calls per sequence; with the profile's examples (30 in CI) every planted cache bug is found
#: (tests/test_planted_bias_modules.py) and a failing sequence shrinks to two or three calls
STEPS = 12

@dataclass(frozen=True)
class Verdict:
    ok: bool
    text: str = ""

    def describe(self) -> str:
        return self.text


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


class Session:
    """One instance of the target's module and the calls made on it so far (``cfg.calls``)."""

    def __init__(self, target, spec: Spec, cfg: BiasCallsConfig):
        self.target, self.spec, self.cfg = target, spec, cfg
        self.device = cfg.calls[0][2] if cfg.calls else target.device
        self.version = 0
        self.module = self.fresh(self.device, 0)

    def fresh(self, device: str, version: int):
        """A new instance on ``device`` holding table ``version``."""
        mod = self.spec.build(impl(self.target, self.spec.name), self.cfg)
        if not is_module(mod):
            raise ImplementationError(f"{self.spec.name}(...) returned {type(mod).__name__}, expected an nn.Module")
        mod = self.move(mod, device)
        if self.spec.learned:
            self.write_table(mod, version)
        return mod

    def move(self, mod, device: str):
        moved = guard.call(self.target.limit, mod.to, f"{self.spec.name}.to", device=device)
        return moved if is_module(moved) else mod

    def write_table(self, mod, version: int) -> None:
        # the learned table (T5RelativePositionBias): where module_tensors reads it
        on_target(self.target, module_tensors.write, mod, self.spec.name, "table", self.cfg.table(version))

    def forward(self, mod, Lq: int, Lk: int, device: str) -> tuple[torch.Tensor, torch.dtype]:
        out = guard.call(self.target.limit, mod, f"{self.spec.name}.forward", Lq, Lk)
        got = expect_floating(out, f"{self.spec.name}.forward", (self.cfg.heads, Lq, Lk))
        if out.device.type != torch.device(device).type:
            raise ImplementationError(f"{self.spec.name}.forward returned a tensor on {out.device}, "
                                      f"the module is on {device}")
        return got.double(), got.dtype

    def judge(self, out: tuple[torch.Tensor, torch.dtype], index: int) -> Verdict:
        Lq, Lk, _, version = self.cfg.calls[index]
        return self.spec.judge(*out, self.cfg, Lq, Lk, self.cfg.table(version) if self.spec.learned else None)

    def step(self, index: int) -> None:
        """Make call ``index`` of ``cfg.calls`` on this instance and check it."""
        Lq, Lk, device, version = self.cfg.calls[index]
        if device != self.device:
            self.module, self.device = self.move(self.module, device), device
        if version != self.version:
            self.write_table(self.module, version)
            self.version = version
        try:
            out = self.forward(self.module, Lq, Lk, device)
        except ImplementationError as exc:  # raised, or returned the wrong thing: say which call
            raise ImplementationError(f"{self.cfg.describe(index, self.spec.name)}: {exc}\n  the calls before "
                                      f"it on the same instance: {self.before(index)}") from exc.__cause__
        verdict = self.judge(out, index)
        if not verdict.ok:
            raise AssertionError(self.explain(index, verdict))

    def before(self, index: int) -> str:
        calls = self.cfg.calls[:index]
        return "; ".join(f"({c[0]}, {c[1]}) on {c[2]}" + (f", table {c[3]}" if c[3] else "") for c in calls) or "none"

    def explain(self, index: int, verdict: Verdict) -> str:
        """The failure: the call, how it differs, the calls before it, and whether a fresh
        instance gets the same call right (then the state the earlier calls left is to blame)."""
        Lq, Lk, device, version = self.cfg.calls[index]
        fresh_ok = self.judge(self.forward(self.fresh(device, version), Lq, Lk, device), index).ok
        alone = ("on a fresh instance the same call is right: the state the earlier calls left (a cached "
                 "bias sliced from the wrong end, or kept after the table changed?) changed this result"
                 if fresh_ok and index else "a fresh instance gets this call wrong too")
        return (f"{self.cfg.describe(index, self.spec.name)} differs from the stateless bias (the last {Lq} "
                f"queries over {Lk} keys): {verdict.describe()}\n  the calls before it on the same instance: "
                f"{self.before(index)}\n  {alone}")


def replay(target, spec: Spec, cfg: BiasCallsConfig) -> None:
    """Every call of the sequence, in order on ONE instance built first, equals the stateless
    bias. (The suites' check: replays a shrunk sequence for the repro line.)"""
    session = Session(target, spec, cfg)
    for index in range(len(cfg.calls)):
        session.step(index)


_KEYS = st.one_of(st.integers(1, 16), st.integers(17, MAX_KEYS))


def machine_for(target, spec: Spec, check: Callable):
    """The state machine class for ``target``'s ``spec.name`` (``check``: the suite's replay)."""
    devices = module_devices(target)

    class BiasModuleCalls(RuleBasedStateMachine):
        @initialize(cfg=spec.configs, seed=SEED)
        def start(self, cfg, seed):
            self.cfg = BiasCallsConfig(**{**cfg, "seed": seed})
            within_declarations(target, self.cfg)
            seed_sequence(target, seed)
            self.version = 0
            self.session = self.guarded(lambda: Session(target, spec, self.cfg))

        def guarded(self, fn):
            __tracebackhide__ = True
            return guarded_step(target, check, self.cfg, fn)

        def call(self, Lq, Lk, device=None, version=None):
            __tracebackhide__ = True
            Lk = max(1, min(Lk, MAX_KEYS))
            Lq = max(1, min(Lq, Lk))
            device = device or (self.last[2] if self.cfg.calls else self.session.device)
            self.cfg = self.cfg.then(Lq, Lk, device, self.version if version is None else version)
            self.session.cfg = self.cfg
            self.guarded(lambda: self.session.step(len(self.cfg.calls) - 1))

        @property
        def last(self):
            return self.cfg.calls[-1]

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

        def teardown(self):
            if getattr(self, "session", None) is not None:
                target.outcome.checked += 1

    return BiasModuleCalls


def run_machine(target, spec: Spec, check: Callable) -> None:
    run_state_machine_as_test(machine_for(target, spec, check), settings=settings(stateful_step_count=STEPS))
