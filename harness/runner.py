"""Run one property check on one configuration, and explain a failure.

A suite's test is a thin Hypothesis wrapper::

    @given(cfg=attn_configs())
    def test_causal(target, cfg):
        run(target, check_causal, cfg)

``check_causal(target, cfg)`` holds the property's logic. On failure ``run``
re-raises with the property's name, the target, the configuration and a
one-line repro command that replays exactly this configuration; Hypothesis
reports that message for the example it shrank to.
"""
from __future__ import annotations

import inspect
import os
import shlex
import sys
import time
from typing import Any, Callable

import pytest
import torch
from hypothesis.errors import UnsatisfiedAssumption

from harness.basics import extras, layout
from harness.boundary import guard, target_ops
from harness.spec.configs import Config
from harness.boundary.handles import call_remote, is_module, is_remote, method
from harness.boundary.pending import Pending
from harness.spec.conventions import ConventionMismatch
from harness.boundary.loader import Target
from harness.boundary.target_import import Missing
from harness.boundary.target_ops import manual_seed


class PropertyFailure(AssertionError):
    """A property does not hold for a target. The fields travel as attributes (the plug-in reads
    them into the report; nothing parses the text back): ``property`` (``prefix.name``), ``kind``
    (``property violated`` / ``implementation error`` / ``convention mismatch``), ``target`` (its
    spec), ``detail`` (the check's message), ``message`` (its first line), ``config`` (the
    configuration's text) and ``repro`` (the one-line command). ``str()`` is the printed message::

        [prefix.name] <kind> for target '<spec>'
          <detail>
          config: <config>
          repro:  <repro>
    """

    def __init__(self, property: str, kind: str, target: str, detail: str, config: str, repro: str,
                 measured: str | None = None):
        self.property, self.kind, self.target = property, kind, target
        self.measured = measured  # a convention mismatch: the convention the code follows
        self.detail, self.config, self.repro = detail, config, repro
        lines = detail.splitlines()
        self.message = lines[0].strip() if lines else ""
        super().__init__(f"[{property}] {kind} for target {target!r}\n  {detail}\n"
                         f"  config: {config}\n  repro:  {repro}")

    def __reduce__(self):
        return type(self), (self.property, self.kind, self.target, self.detail, self.config, self.repro,
                            self.measured)


def property_failure(exc: BaseException | None) -> PropertyFailure | None:
    """The ``PropertyFailure`` that ``exc`` is or holds: Hypothesis re-raises a test's failure as
    it was raised, or, reporting several distinct failures, as an exception group of them (the
    first is taken); None when there is none."""
    if isinstance(exc, PropertyFailure):
        return exc
    for inner in getattr(exc, "exceptions", None) or ():
        found = property_failure(inner)
        if found is not None:
            return found
    return None


class Unsupported(Exception):
    """A check needs a feature the target declares it does not support (``HARNESS_UNSUPPORTED``)."""


#: the start of every skip reason for a feature the target does not support (the table's cell)
UNSUPPORTED = "unsupported"


class UnsupportedSkip(pytest.skip.Exception):
    """The skip of a property the target does not support (declared, or NotImplementedError): its
    kind travels as this type (``harness.verdicts.verdict``: ``skip_kind`` "unsupported"), not in its text."""


class NotLoadedSkip(pytest.skip.Exception):
    """The skip of every property of a target that does not load (an error in the table)."""


# pytest prints a skip as "<type>: <reason>" ("Skipped: ..." for its own); these two print as
# pytest's own, so a user's skip summary reads as before (their kind is the type, not the text)
for _cls in (UnsupportedSkip, NotLoadedSkip):
    _cls.__module__, _cls.__qualname__ = "builtins", "Skipped"


def skip_unsupported(why: str):
    """Skip the running property as unsupported (``why``: the declaration or the configurations)."""
    raise UnsupportedSkip(f"{UNSUPPORTED} ({why})")


def require_features(target: Target, *features: str) -> None:
    """Raise ``Unsupported`` when the target declares one of ``features`` unsupported; a check
    calls it before it uses the feature (``run`` reports the property ``unsupported (...)``)."""
    from harness.spec.declarations import FEATURES
    for f in features:
        if f in target.info.unsupported:
            raise Unsupported(f"declared: {FEATURES[f]} is in HARNESS_UNSUPPORTED")
        if f in target.info.lacking:  # (an optional parameter its function does not take)
            raise Unsupported(f"declared: {target.info.lacking[f]} ({FEATURES[f]})")


def not_implemented(exc: BaseException) -> str | None:
    """The message when ``exc`` is the target's NotImplementedError (here or in its worker)."""
    cause = exc.__cause__
    if isinstance(cause, NotImplementedError):
        return str(cause) or "NotImplementedError"
    if getattr(cause, "type_name", None) == "NotImplementedError":
        return cause.message or "NotImplementedError"
    return None


class ConfigUnsupported(UnsatisfiedAssumption):
    """This configuration needs what the target does not support. Hypothesis rejects the example
    and draws another (an explicit ``@example`` is passed over), so the property is still checked
    on every configuration the target does support; the plug-in reports the rejected ones."""

    def __init__(self, reason: str):
        super().__init__(reason)


#: a property whose first this-many configurations are all unsupported, with none checked, is
#: reported unsupported as a whole (a count, never a clock: the same verdict on a busy machine)
GIVE_UP_AFTER = 30


def _reject(target: Target, reason: str, cfg: Config) -> None:
    """Pass over this configuration as unsupported (``reason`` starts with ``declared:``,
    ``undeclared:`` or ``interpreter:``), or the whole property once ``GIVE_UP_AFTER`` were and none was checked.
    Recorded in ``target.outcome`` (the running test's, reset by the plug-in before each test)."""
    outcome = target.outcome
    outcome.unsupported.append((reason, str(cfg)))
    if outcome.checked == 0 and len(outcome.unsupported) >= GIVE_UP_AFTER:
        skip_unsupported(outcome.unsupported_summary())
    raise ConfigUnsupported(reason)


def exclude(target: Target, reason: str, cfg: Config) -> None:
    """Pass over ``cfg``, which the target's declarations rule out (``reason``: ``declared:
    ...``): Hypothesis draws another. Recorded in ``target.outcome.excluded``, so that a property
    whose every configuration was ruled out is reported ``unsupported (declared: ...)`` (by the
    plug-in, on Hypothesis' Unsatisfiable), never a failure."""
    target.outcome.excluded.append((reason, str(cfg)))
    raise ConfigUnsupported(reason)


#: the start of the reason of a configuration Triton's interpreter cannot run right (``harness.boundary.interpret``)
INTERPRETER = "interpreter:"


def within_declarations(target: Target, cfg: Config) -> None:
    """Pass over ``cfg`` (``exclude``) when the target's declarations rule it out: for a check
    that draws its configuration itself (a state machine's first step, a history's calls). A dtype
    Triton's interpreter computes wrong (``interpreter: ...``) is passed over as unsupported and
    counted in the cell (``_reject``): the target did not say so, the harness found it."""
    why = target.declared_out(cfg)
    if why is not None:
        if why.startswith(INTERPRETER):
            _reject(target, why, cfg)
        exclude(target, why, cfg)


def seed_call(target: Target, cfg: Config) -> None:
    """Seed torch's global RNG (here and, isolated, in the worker before its next call) from
    ``cfg.seed``, when it has one: a target that draws from it replays exactly."""
    seed = getattr(cfg, "seed", None)
    if seed is not None:
        manual_seed(seed)
        target.backend.seed_next(seed)  # (in its worker: seeded before the example's first call)


def record_label(target: Target, label: str) -> None:
    """Record an outcome label (e.g. ``convention:bottom_right``) for the running test of
    ``target`` (``target.outcome.labels``; the conformance table shows the last one)."""
    target.outcome.labels.append(label)


def impl(target: Target, name: str) -> Callable[..., Any]:
    """The target's ``name``, every call guarded (``harness.boundary.guard.call``)."""
    fn = target.lookup(name)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        return guard.call(target.limit, fn, name, *args, **kwargs)

    guarded.__name__ = name
    return guarded


def submit(target: Target, name: str, *args: Any, **kwargs: Any) -> Pending:
    """``impl(target, name)(*args, **kwargs)``, read later with ``.result()`` (``harness.boundary.pending``):
    in a worker the target computes while the caller computes what it compares the result with.
    The arguments must not be touched until ``.result()``; the target's errors are raised there."""
    return submit_call(target, target.lookup(name), name, *args, **kwargs)


def submit_call(target: Target, fn: Any, name: str, *args: Any, **kwargs: Any) -> Pending:
    """``guard.call(target.limit, fn, name, *args, **kwargs)`` as ``submit`` (``fn``: a handle, e.g.
    the target's module, or a callable here)."""
    if is_remote(fn):
        return call_remote(fn, name, args, kwargs, wait=False)
    return Pending.now(guard.call, target.limit, fn, name, *args, **kwargs)


def move(target: Target, mod: Any, name: str, **to: Any) -> Any:
    """``mod.to(**to)`` under the call rules (``name``: the module's protocol name); the moved
    module, or ``mod`` itself when ``.to`` returned something else (a model's ``.to`` returns
    ``self``). For a handle it is one round trip (``handles.method``)."""
    moved = guard.call(target.limit, method(mod, "to"), f"{name}.to", **to)
    return moved if is_module(moved) else mod


def on_target(target: Target, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` next to the target's objects: in its worker when it is isolated
    (``fn`` must be a module-level function, imported there by name; handles among the
    arguments are the worker's objects), else here. Use it for what must touch the target's
    objects directly: writing parameters, autograd through its code, building under a device
    context. An ``AssertionError`` that ``fn`` raises is a property's verdict; anything else the
    call raises is an ``ImplementationError`` of the target."""
    return target.backend.apply(fn, args, kwargs, f"{getattr(fn, '__name__', fn)}(...)")


def submit_on_target(target: Target, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Pending:
    """``on_target`` as ``submit``: read with ``.result()``, the caller's own computation in between."""
    return target.backend.apply(fn, args, kwargs, f"{getattr(fn, '__name__', fn)}(...)", wait=False)


def unverified(target: Target, prop: str, keys) -> list:
    """Of a property's fixed inputs (``keys``: the same grid in every example, e.g. every H in a
    list of head counts), those not yet verified for this target object in this session. A
    deterministic function gives the same answer on the same input, so a grid that passed is not
    called again in the next 30 examples; the drawn input is always checked, and a failing key
    is never recorded, so shrinking and the repro line see the failure again."""
    return [k for k in keys if (prop, k) not in target.verified]


def verified(target: Target, prop: str, key) -> None:
    target.verified.add((prop, key))


#: a batch of ``call_each`` aims at this many seconds (far below any per-call limit)
BATCH_S = 0.5


def call_each(target: Target, name: str, arg_tuples: list[tuple], kwargs: dict) -> list:
    """``[impl(target, name)(*args, **kwargs) for args in arg_tuples]``, in order; when the
    target is isolated, in batches of calls per request (a statistical property's thousands of
    calls then cost a few round trips, not one each). The batch size adapts to the call's speed
    so that a batch takes about ``BATCH_S`` (at most a tenth of the per-call limit): speed
    decides how calls are grouped, never which calls are made or what is checked."""
    if not target.isolated:
        fn = impl(target, name)
        return [fn(*args, **kwargs) for args in arg_tuples]
    fn, out, size, budget = target.lookup(name), [], 8, min(BATCH_S, target.limit.seconds / 10)
    while len(out) < len(arg_tuples):
        batch = arg_tuples[len(out):len(out) + size]
        start = time.perf_counter()
        out += target.backend.apply(target_ops.call_each, (fn, batch, kwargs), {},
                                   f"{name} (calls {len(out) + 1}-{len(out) + len(batch)} of {len(arg_tuples)})")
        per_call = max(time.perf_counter() - start, 1e-6) / len(batch)
        size = max(1, min(4 * size, int(budget / per_call)))
    return out


def call_under_autocast(target: Target, name: str, dtype: str, *args: Any, **kwargs: Any) -> Any:
    """The target's ``name`` called inside ``torch.autocast(<its device type>, dtype)`` where it
    runs (its worker when isolated), as training code calls it; ``Unsupported`` when the target
    declares ``autocast`` unsupported."""
    require_features(target, "autocast")
    return on_target(target, target_ops.under_autocast, torch.device(target.device).type, dtype, target.lookup(name),
                     *args, **kwargs)


def qualified_property(module_name: str, name: str) -> str:
    """``prefix.name``: the suite module's ``PROPERTY_PREFIX`` (default: its last dotted part) and
    the property's own name; the conformance table's row."""
    prefix = getattr(sys.modules.get(module_name), "PROPERTY_PREFIX", module_name.rsplit(".", 1)[-1])
    return f"{prefix}.{name}"


def property_name(check: Callable) -> str:
    return qualified_property(check.__module__, check.__name__.removeprefix("check_"))


def repro_command(target: Target, check: Callable, cfg: Config) -> str:
    module = sys.modules.get(check.__module__)  # (a check built by an engine lives where it is installed)
    path = getattr(module, "__file__", None) or inspect.getsourcefile(check) or check.__module__
    ours = layout.suite_module(path) if os.path.exists(path) else None
    if ours:  # the harness's own suites by module name: the same line in a checkout and a wheel
        path = ours
    else:
        try:  # relative when under the working directory; absolute otherwise (a ../.. path is fragile)
            rel = os.path.relpath(path)
            path = rel if not rel.startswith("..") else os.path.abspath(path)
        except ValueError:
            pass
    extra = "".join(f" --convention {k}={v}" for k, v in sorted(target.cli_conventions.items()))
    if not target.isolated:
        extra += " --isolation none"
    return (f"python -m harness repro {shlex.quote(path + '::' + check.__name__)} "
            f"--impl {shlex.quote(target.spec)}{extra} --config {shlex.quote(cfg.to_json())}")


def _skip_if_extra_missing(exc: BaseException) -> None:
    """A check that needs an optional dependency of the harness that is not installed (transformers
    for the BERT models, ...) is skipped with its install line: not a failure of the target."""
    hint = extras.hint_for(exc)
    if hint is not None:
        pytest.skip(hint)


def run(target: Target, check: Callable[[Target, Any], Any], cfg: Config) -> Any:
    """Run ``check(target, cfg)``; on failure raise ``PropertyFailure`` with a repro. A
    configuration that needs a feature the target declares unsupported, or for which it raises
    ``NotImplementedError``, raises ``ConfigUnsupported``: Hypothesis draws another, and the
    plug-in reports the property's cell with the count of such configurations (``unsupported
    (...)`` when none could be checked)."""
    __tracebackhide__ = True  # pytest shows the message, not this frame
    if target.info.interpreted:  # Triton's interpreter: the kernel's own tile boundaries, fewer checks
        from harness.boundary.interpret import fit, over_budget
        if over_budget(target.outcome.checked):
            return None
        cfg = fit(cfg, target.info.tiles)
    target.outcome.reached += 1
    within_declarations(target, cfg)  # a dtype or size the target declares it does not support: draw another
    seed_call(target, cfg)
    try:
        result = check(target, cfg)
    except Missing:
        raise
    except Unsupported as exc:
        _reject(target, str(exc), cfg)
    except ImportError as exc:
        _skip_if_extra_missing(exc)
        raise
    except (AssertionError, ConventionMismatch) as exc:
        if isinstance(exc, guard.ImplementationError):
            _skip_if_extra_missing(exc)
        why = not_implemented(exc) if isinstance(exc, guard.ImplementationError) else None
        if why is not None:  # not a bug, not a pass: this configuration is reported unsupported
            _reject(target, f"undeclared: raised NotImplementedError: {why.splitlines()[0][:160]}; "
                    f"declare it in HARNESS_UNSUPPORTED or HARNESS_SIZES", cfg)
        if target.info.interpreted and isinstance(exc, guard.ImplementationError):
            from harness.boundary.interpret import interpreter_gap
            gap = interpreter_gap(exc)  # the interpreter lacks what the kernel calls: not the kernel's bug
            if gap is not None:
                _reject(target, gap, cfg)
        target.outcome.checked += 1
        kind = "implementation error" if isinstance(exc, guard.ImplementationError) else (
            "convention mismatch" if isinstance(exc, ConventionMismatch) else "property violated")
        raise PropertyFailure(property_name(check), kind, target.spec, str(exc).strip(), str(cfg),
                              repro_command(target, check, cfg), getattr(exc, "measured", None)) from None
    target.outcome.checked += 1
    return result
