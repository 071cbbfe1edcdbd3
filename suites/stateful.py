"""The one state-machine engine of the stateful modules (a module built once, called again and again).

A stateful module of the protocol (``RotaryEmbedding``, ``AlibiPositionalBias``,
``T5RelativePositionBias``) is checked by a sequence of calls on ONE instance: each call must
equal the stateless answer, whatever calls came before it. The engine is shared; what differs
per module is its ``Module`` (how to build, call and judge it) and its machine's rules (which calls
a sequence draws):

    Module                a module's description: build, forward, judge, describe a call
    Session               one instance and the calls made on it so far (``cfg.calls``): ``step(i)``
                          makes call i and checks it; a failure is ``explain``ed (the call, the
                          calls before it, and whether a fresh instance gets the same call right)
    replay                every call of a sequence on one fresh instance (the suites' check: a
                          shrunk sequence's repro line replays it)
    module_dtypes         the dtypes a machine draws its calls in (what the target supports)
    CallsMachine          the Hypothesis ``RuleBasedStateMachine`` base: ``begin`` (the instance),
                          ``add`` (one more call, checked at once), ``last``; a suite's subclass
                          holds the rules
    guarded_step          a step whose failure is replayed on a fresh instance by ``run`` (the
                          reported failure and its repro line are the replay's)

The configuration (``RopeCallsConfig``, ``BiasCallsConfig``) holds the calls: ``cfg.then(*call)``
is the sequence with one more, ``cfg.calls[i]`` one call, whose device is ``Module.device_of``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hypothesis.stateful import RuleBasedStateMachine

from harness.runner import PropertyFailure, property_name, repro_command
from harness.spec.configs import DTYPES
from harness.suites.kit import ImplementationError, impl, is_module, move, manual_seed, run, within_declarations


@dataclass(frozen=True)
class Verdict:
    """One call's judgement: ``ok``, and what differs (``describe()``) when it is not."""

    ok: bool
    text: str = ""

    def describe(self) -> str:
        return self.text


class Module:
    """How the engine drives one stateful module (a subclass per module; one instance per sequence).

    ``name``: the protocol name; ``stale``: what earlier calls could have left behind (said when a
    fresh instance gets the failing call right)."""

    name: str = ""
    stale: str = ""
    #: what a new instance holds before its first call (``state_of``'s value; None: nothing)
    initial: Any = None

    def construct(self, cls, cfg) -> Any:
        """A new instance from the target's class ``cls``."""
        raise NotImplementedError

    def constructed(self, cfg) -> str:
        """The constructor call as a failure names it."""
        return f"{self.name}(...)"

    def device_of(self, call) -> str:
        raise NotImplementedError

    def state_of(self, call) -> Any:
        """What a call says the instance holds besides its arguments (T5's table version)."""
        return self.initial

    def set_state(self, target, mod, cfg, state) -> None:
        """Make ``mod`` hold ``state`` (write the learned table)."""

    def forward(self, target, mod, cfg, index: int) -> Any:
        """Call ``index`` of ``cfg.calls`` on ``mod``: what ``judge`` takes."""
        raise NotImplementedError

    def judge(self, out, cfg, index: int) -> Verdict:
        raise NotImplementedError

    def describe(self, cfg, index: int) -> str:
        """``call i of n: ...``."""
        raise NotImplementedError

    def call_text(self, call) -> str:
        """One earlier call, in the list of the calls before a failure."""
        raise NotImplementedError

    def expected(self, cfg, index: int) -> str:
        """What the call must equal, as ``differs from ...`` says it."""
        raise NotImplementedError


class Session:
    """One instance of the target's module and the calls made on it so far (``cfg.calls``)."""

    def __init__(self, target, module: Module, cfg):
        self.target, self.module, self.cfg = target, module, cfg
        self.device = module.device_of(cfg.calls[0]) if cfg.calls else target.device
        self.state = module.initial
        self.instance = self.fresh(self.device, self.state)

    def fresh(self, device: str, state):
        """A new instance on ``device`` holding ``state``."""
        mod = self.module.construct(impl(self.target, self.module.name), self.cfg)
        if not is_module(mod):
            raise ImplementationError(f"{self.module.constructed(self.cfg)} returned {type(mod).__name__}, "
                                      f"expected an nn.Module")
        mod = self.move(mod, device)
        self.module.set_state(self.target, mod, self.cfg, state)
        return mod

    def move(self, mod, device: str):
        return move(self.target, mod, self.module.name, device=device)

    def step(self, index: int) -> None:
        """Make call ``index`` of ``cfg.calls`` on this instance and check it."""
        call = self.cfg.calls[index]
        device, state = self.module.device_of(call), self.module.state_of(call)
        if device != self.device:
            self.instance, self.device = self.move(self.instance, device), device
        if state != self.state:
            self.module.set_state(self.target, self.instance, self.cfg, state)
            self.state = state
        try:
            out = self.module.forward(self.target, self.instance, self.cfg, index)
        except ImplementationError as exc:  # raised, or returned the wrong thing: say which call
            raise ImplementationError(f"{self.module.describe(self.cfg, index)}: {exc}\n  the calls before "
                                      f"it on the same instance: {self.before(index)}") from exc.__cause__
        verdict = self.module.judge(out, self.cfg, index)
        if not verdict.ok:
            raise AssertionError(self.explain(index, verdict))

    def before(self, index: int) -> str:
        return "; ".join(self.module.call_text(c) for c in self.cfg.calls[:index]) or "none"

    def explain(self, index: int, verdict: Verdict) -> str:
        """The failure: the call, how it differs, the calls before it, and whether a fresh
        instance gets the same call right (then the state the earlier calls left is to blame)."""
        call, module = self.cfg.calls[index], self.module
        before = self.before(index)
        fresh = self.fresh(module.device_of(call), module.state_of(call))
        fresh_ok = module.judge(module.forward(self.target, fresh, self.cfg, index), self.cfg, index).ok
        alone = (f"on a fresh instance the same call is right: the state the earlier calls left ({module.stale}) "
                 f"changed this result" if fresh_ok and index else "a fresh instance gets this call wrong too")
        return (f"{module.describe(self.cfg, index)} differs from {module.expected(self.cfg, index)}: "
                f"{verdict.describe()}\n  the calls before it on the same instance: {before}\n  {alone}")


def replay(target, module: Module, cfg) -> None:
    """Every call of the sequence, in order on ONE instance built first, is right (a suite's
    check: it replays a shrunk sequence for the repro line)."""
    session = Session(target, module, cfg)
    for index in range(len(cfg.calls)):
        session.step(index)


def module_dtypes(target) -> list[str]:
    """The dtypes a state machine draws its calls in: those the target supports (``Target.supports``'
    rule for a configuration's dtype; an interpreted target's also less those Triton's interpreter
    computes wrong)."""
    return [d for d in DTYPES if (target.dtypes is None or d in target.dtypes) and d not in target.info.unsupported
            and d not in target.info.interpreter_unsupported]


def seed_sequence(target, seed: int) -> None:
    """Seed a call sequence as ``runner.run`` seeds a check (its replay is seeded alike): here and,
    for an isolated target, in its worker before the next call."""
    manual_seed(seed)
    target.backend.seed_next(seed)


def guarded_step(target, check, cfg, fn):
    """``fn()`` (one step of a state machine over call sequences); on a failure the sequence so far
    (``cfg``) is replayed on a fresh instance by the repro's own path (``run``), whose failure is the
    one reported (a PropertyFailure with the repro line)."""
    __tracebackhide__ = True
    try:
        return fn()
    except AssertionError as exc:
        failure = exc
    run(target, check, cfg)  # raises PropertyFailure when the sequence replays
    raise PropertyFailure(property_name(check), "property violated", target.spec,
                          f"{str(failure).strip()}\n  (replayed on a fresh instance the sequence passed: "
                          f"the result depends on more than these calls)", str(cfg),
                          repro_command(target, check, cfg)) from None


class CallsMachine(RuleBasedStateMachine):
    """The base of a stateful module's state machine. A suite's subclass (made per target by its
    ``machine_for``) sets ``target`` and ``check = staticmethod(...)`` (the suite's replay), starts the sequence with
    ``begin`` from its ``@initialize`` rule, and its ``@rule``s add calls with ``add``."""

    target: Any = None
    check: Callable | None = None

    def begin(self, cfg, module: Callable[[], Module]) -> None:
        """The sequence's configuration (no calls yet) and its instance, built by ``Session`` on
        ``module()`` (a factory: building the description may call the target, e.g. measure a
        convention, and such a failure is the step's)."""
        __tracebackhide__ = True
        self.cfg = cfg
        within_declarations(self.target, cfg)
        seed_sequence(self.target, cfg.seed)
        self.session = self.guarded(lambda: Session(self.target, module(), self.cfg))

    def guarded(self, fn):
        __tracebackhide__ = True
        return guarded_step(self.target, self.check, self.cfg, fn)

    def add(self, *call) -> None:
        """One more call (``cfg.then(*call)``), made on the instance and checked."""
        __tracebackhide__ = True
        self.cfg = self.cfg.then(*call)
        self.session.cfg = self.cfg
        self.guarded(lambda: self.session.step(len(self.cfg.calls) - 1))

    @property
    def last(self):
        return self.cfg.calls[-1]

    def teardown(self):
        if getattr(self, "session", None) is not None:
            self.target.outcome.checked += 1
