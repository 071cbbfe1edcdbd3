"""History independence: a protocol function's answer to a call does not depend on the calls before it.

A stateless suite calls a function on independent draws. A function that hides state -- a cache
keyed on too little, a table built at the first call's size and sliced, a library module kept per
(dim, base) behind the function as users' wrappers do (rotary-embedding-torch 0.8.2's offset cache
returns rows computed for another call) -- passes them whenever no two draws share the key.

The history properties (``suites/test_history.py``, one per protocol function) draw a *history*
(``HistoryConfig``): a first call, 1 to 3 other calls of the same name (other lengths, offsets,
dtypes, batch sizes; each other call shares each of the first call's *identity* fields --
RoPE's (D, base), its dtype, ALiBi's head count -- with probability 1/2, where a cache keyed on
them would be hit; or, for the names given ``vary``, is the first call with its offset, length
or dtype changed: "offset, then none", "long, then short"), then the first call again. Calls the target's declarations rule out are
dropped (a first call ruled out is passed over as the stateless properties pass it over). The
worker also keeps what earlier examples left behind: a failure is replayed on a fresh worker
and judged there (``judged``), so the verdict, the shrinking and the repro line are the drawn
history's own.

Two ways to judge, per name:
- ``replay``: every call is judged by a single-call check of the family's suite (the float64
  reference under the tolerance policy, ``harness/spec/tolerance.py``). A correct implementation may
  differ between two calls only within rounding, which the policy allows; so each call after
  the first is judged after a history, and the repeat of the first after the whole of it,
  against the same truth as a call in a fresh state.
- ``replay_same``: for a function with no float64 truth per call (a sampler driven by the
  generator it is given), the repeat of the first call, with a generator seeded alike, must
  return exactly what the first call returned: the output is integers, and the generator
  decides everything (the samplers' own ``generator`` properties).
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harness import runner
from harness.spec import protocol
from harness.spec.configs import Config, HistoryConfig
from harness.suites.kit import ConventionMismatch, ImplementationError
from harness.suites.strategies import NO_SHRINK
from harness.boundary.isolation import WorkerLost

#: at most this many other calls between the first call and its repeat
MAX_OTHERS = 3


def examples(**kwargs) -> settings:
    """A history property's settings: two thirds of the loaded profile's examples, at least 20
    (each example makes 2-5 calls, each a whole single-call check: harness-ci and harness-dev
    run 20, harness-thorough 200). rotary-embedding-torch 0.8.2's offset cache is hit by about
    13 % of RoPE histories (simulated), so 20 random examples find it with probability 0.94."""
    return settings(max_examples=max(20, 2 * settings.default.max_examples // 3), **kwargs)


@st.composite
def histories(draw, name: str, configs: st.SearchStrategy, keep: tuple = (), vary: tuple = (),
              variant: Callable[[Config], st.SearchStrategy] | None = None) -> HistoryConfig:
    """A history of calls of ``name``: a first call drawn from ``configs`` and 1..``MAX_OTHERS``
    others. ``keep`` lists the first call's identity: field names, or tuples of names that go
    together (RoPE's ``("D", "base")``); a fresh other call shares each of them with probability
    1/2 (shrinking towards shared). ``vary`` (groups likewise): with probability 1/2 an other
    call is instead the first call with some of these groups taken from a fresh draw (each with
    probability 1/2): the same call at another offset, length or dtype. ``variant`` (instead of
    ``vary``): that other call is drawn from ``variant(first)``, for a change no fresh draw makes
    (packed tokens split anew at the same total)."""
    first = draw(configs, label="first call")
    calls = [first]
    for _ in range(draw(st.integers(1, MAX_OTHERS), label="other calls")):
        fresh = draw(configs)
        is_variant = bool(vary or variant) and draw(st.booleans(), label="a variant of the first call")
        if is_variant and variant is not None:
            calls.append(draw(variant(first)))
            continue
        groups = [(g,) if isinstance(g, str) else tuple(g) for g in (vary if is_variant else keep)]
        changed = {}
        for fields in groups:
            take = draw(st.booleans()) if is_variant else not draw(st.sampled_from([True, False]))
            source = fresh if take else first
            changed.update({f: getattr(source, f) for f in fields})
        calls.append(dataclasses.replace(first if is_variant else fresh, **changed))
    return HistoryConfig(name=name, calls=tuple(c.to_json() for c in calls))


def _sequence(target, cfg: HistoryConfig) -> list[Config]:
    """The calls the target takes, then the first again (the first one ruled out: passed over)."""
    calls = cfg.configs()
    runner.within_declarations(target, calls[0])
    kept = [c for c in calls if target.supports(c)]
    return [*kept, kept[0]]


def _after(sequence: list[Config], index: int) -> str:
    last = index == len(sequence) - 1
    before = "; ".join(f"{i + 1}: {c}" for i, c in enumerate(sequence[:index]))
    return (f"call {index + 1} of {len(sequence)}" + (" (the first call again)" if last else "")
            + f" differs after the calls before it on the same target, so the function keeps state between "
              f"calls{' (as call 1 it passed)' if last else ''}\n  the calls before it: {before}")


def judged(target, cfg: HistoryConfig, attempt: Callable[[], None]) -> None:
    """Run ``attempt`` (the history, from its first call); the verdict is the history's own. The
    target's worker keeps what earlier examples' calls left behind, so a failure is judged again
    on a fresh worker (killed; the next call starts a new one, ~0.2 s), and the fresh replay's
    verdict stands: a pass there means the failure needed calls from outside this history, which
    a later example's own history must show. A history that failed fresh is run fresh whenever
    it is run again (Hypothesis' replays of it, the repro line): its failure is deterministic.
    With ``--isolation none`` there is no fresh process: the first verdict stands."""
    worker, key = target.worker, cfg.to_json()
    failed = target.failed_histories
    if worker is not None and key in failed:
        worker.kill()
    try:
        attempt()
        return
    except AssertionError as exc:
        if worker is None or key in failed or runner.not_implemented(exc) or isinstance(exc, WorkerLost):
            raise  # (a NotImplementedError is passed over by run(); a crash or a timeout is its own verdict)
    worker.kill()
    try:
        attempt()
    except AssertionError:
        failed.add(key)
        raise


def replay(target, cfg: HistoryConfig, check: Callable[[Any, Config], Any]) -> None:
    """Every call of the history, in order, passes ``check`` (a family's single-call check)."""
    sequence = _sequence(target, cfg)

    def attempt():
        for index, call in enumerate(sequence):
            runner.seed_call(target, call)
            try:
                check(target, call)
            except (ImplementationError, ConventionMismatch):
                raise  # (their kind is the report's: not restated as a property violation)
            except AssertionError as exc:
                if index == 0:
                    raise  # wrong as the first call: the family's own properties say why
                raise AssertionError(f"{_after(sequence, index)}\n  {str(exc).strip()}") from None

    judged(target, cfg, attempt)


def same(a: Any, b: Any) -> bool:
    """Exactly equal: tensors (shape, dtype and values), and sequences of them, element by element."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                and a.dtype == b.dtype and torch.equal(a.cpu(), b.cpu()))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def replay_same(target, cfg: HistoryConfig, call: Callable[[Any, Config], Any]) -> None:
    """The repeat of the first call returns exactly what the first call returned (``call`` makes
    one call of the function, with a generator seeded from the configuration)."""
    sequence = _sequence(target, cfg)

    def attempt():
        outputs = []
        for call_cfg in sequence:
            runner.seed_call(target, call_cfg)
            outputs.append(call(target, call_cfg))
        if not same(outputs[0], outputs[-1]):
            raise AssertionError(f"{_after(sequence, len(sequence) - 1)}\n  with a generator seeded alike, the "
                                 f"first call returned {_brief(outputs[0])}, its repeat {_brief(outputs[-1])}")

    judged(target, cfg, attempt)


def _brief(out: Any) -> str:
    if isinstance(out, torch.Tensor):
        return f"{tuple(out.shape)} {str(out.dtype).removeprefix('torch.')} {out.flatten()[:12].tolist()}"
    if isinstance(out, (tuple, list)):
        return "(" + ", ".join(_brief(o) for o in out[:3]) + (", ..." if len(out) > 3 else "") + ")"
    return repr(out)[:80]


# ---- the engine: one History per function, declared by its family ------------------------------

@dataclasses.dataclass(frozen=True, kw_only=True)
class History:
    """How ``history.<name>`` draws and judges a history of calls of one protocol function.

    ``configs``: the single-call strategy (what the family's own properties draw); ``judge``: the
    family's single-call check ``(target, cfg)``, whose property names the judgement (or, with
    ``sampler``, one call ``(target, cfg) -> output`` whose repeat must be equal); ``keep``, ``vary``
    and ``variant`` as ``histories`` takes them; ``explicit``: histories run first on every profile;
    ``max_examples``: a fixed count instead of ``examples()``'s; ``shrink=False``: no shrinking
    (a check too costly to repeat); ``judged_by``: the docstring's words for a judge that is no
    property; ``others`` and ``note``: words the docstring adds after "1-3 others" and at its end."""

    name: str
    configs: st.SearchStrategy
    judge: Callable[[Any, Config], Any]
    keep: tuple = ()
    vary: tuple = ()
    variant: Callable[[Config], st.SearchStrategy] | None = None
    explicit: tuple[HistoryConfig, ...] = ()
    sampler: bool = False
    max_examples: int | None = None
    shrink: bool = True
    judged_by: str = ""
    others: str = ""
    note: str = ""

    def docstring(self) -> str:
        if self.sampler:
            return ("A sampler: the repeat of the first call after 1-3 others (same generator seed) equals "
                    f"what the first call gave, exactly{self.note}.")
        by = self.judged_by or f"``{runner.property_name(self.judge)}``"
        return f"Each call of the history (a first call, 1-3 others{self.others}, the first again) is judged by {by}{self.note}."


def build(spec: History, module: str) -> tuple[Callable, Callable]:
    """The ``check_<name>`` and ``test_<name>`` of ``spec``, as if written in ``module``."""
    judge, replayer = spec.judge, (replay_same if spec.sampler else replay)

    def check(target, cfg):
        replayer(target, cfg, judge)

    def test(target, cfg):
        runner.run(target, check, cfg)

    for fn, prefix in ((check, "check_"), (test, "test_")):
        fn.__name__ = fn.__qualname__ = prefix + spec.name
        fn.__module__ = module
    check.__doc__ = spec.docstring()
    test = given(cfg=histories(spec.name, spec.configs, keep=spec.keep, vary=spec.vary, variant=spec.variant))(test)
    for cfg in reversed(spec.explicit):
        test = example(cfg=cfg)(test)
    phases = {} if spec.shrink else {"phases": NO_SHRINK}
    test = (settings(max_examples=spec.max_examples, **phases) if spec.max_examples else examples(**phases))(test)
    return check, pytest.mark.needs(spec.name)(test)


def declared(families=None) -> dict[str, "History"]:
    """name -> History of every family's ``specs.HISTORIES`` (families in the records' order)."""
    out: dict[str, History] = {}
    for family in families or protocol.FAMILIES:
        for spec in getattr(importlib.import_module(f"harness.suites.{family}.specs"), "HISTORIES", ()):
            if protocol.NAMES[spec.name].family != family or spec.name in out:
                raise ValueError(f"history of {spec.name}: declared in suites/{family}/specs.py, "
                                 f"which is not its family's (or twice)")
            out[spec.name] = spec
    return out


def install(namespace: dict) -> None:
    """Put every declared history's ``check_``/``test_`` pair into ``namespace`` (a module's globals)."""
    for spec in declared().values():
        check, test = build(spec, namespace["__name__"])
        namespace[check.__name__], namespace[test.__name__] = check, test
