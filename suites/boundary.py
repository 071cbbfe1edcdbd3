"""A failure found on a tile-boundary example (``regimes.covering``), shrunk to the smallest
configuration of its kind that still fails.

Hypothesis shrinks what it draws, never an explicit example: a failure on a boundary example was
reported at the example's sizes (``rope.agreement`` at L = 65, D = 224) where the README promises the
smallest counterexample. Here the failing example's sizes are lowered one at a time, each by a
binary search for the smallest value at which the property still fails the same way (the same
property, the same kind of failure), the rest of the configuration kept: its type, dtype, seed and
flags, the order between related sizes (L < S stays L < S, a window below L stays below it, equal
sizes shrink together), the group hq / hkv, and the minimums its strategies draw (even RoPE head
dims from 4; at least 2 features and tokens of a norm where the example has them). The failure then
names the smallest configuration found, with its repro, and says which boundary example it was
shrunk from; when no smaller one fails, or the type has no sizes here (``KINDS``), it says
"boundary example, not shrunk". A budget bounds the search: ``MAX_TRIES`` replays and ``BUDGET_S``
seconds.
"""
from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

from harness.spec import explain

#: the replays and seconds one failure's shrinking may take (each replay is one run of the property)
MAX_TRIES = 64
BUDGET_S = 60.0
#: passes over the sizes (a size lowered can let another go lower)
ROUNDS = 3

Location = tuple  # (field, None) for an int field, (field, i) for element i of a tuple field


@dataclass(frozen=True)
class Kind:
    """How one configuration type shrinks: ``sizes(cfg)`` -> the (location, lowest value, step) of
    each size; ``orders(cfg)`` -> groups of locations whose order is kept; ``heads``: the (hq, hkv)
    fields whose group hq / hkv is kept (hkv shrinks, hq follows); ``valid(original, candidate)``."""
    sizes: Callable[[Any], list[tuple[Location, int, int]]]
    orders: Callable[[Any], list[tuple[Location, ...]]] = lambda cfg: []
    heads: tuple[str, str] | None = None
    valid: Callable[[Any, Any], bool] = lambda original, candidate: True


def _each(field: str, low: int = 1):
    """The non-zero elements of tuple field ``field`` (a zero-length sequence stays one)."""
    return lambda cfg: [((field, i), low, 1) for i, v in enumerate(getattr(cfg, field)) if v > 0]


def _fields(*spec):
    return lambda cfg: [((f, None), low, step) for f, low, step in spec]


def _join(*parts):
    return lambda cfg: [x for p in parts for x in p(cfg)]


def _at_least_two(*fields):
    """A product of tuple fields that was at least 2 stays so (properties that draw min_features=2)."""
    def valid(original, candidate):
        return all(math.prod(getattr(candidate, f)) >= min(2, math.prod(getattr(original, f))) for f in fields)
    return valid


_ATTN = _join(_fields(("L", 1, 1), ("S", 1, 1), ("E", 1, 1), ("Ev", 1, 1)), _each("batch"))

#: by configuration type name (the first one in its MRO that is listed)
KINDS: dict[str, Kind] = {
    "WindowConfig": Kind(_join(_ATTN, _fields(("window", 1, 1))),
                         lambda cfg: [(("L", None), ("S", None), ("window", None)), (("E", None), ("Ev", None))],
                         heads=("hq", "hkv")),
    "AttnConfig": Kind(_ATTN, lambda cfg: [(("L", None), ("S", None)), (("E", None), ("Ev", None))],
                       heads=("hq", "hkv")),
    "VarlenConfig": Kind(_join(_each("q_lens"), _each("k_lens"), _fields(("E", 1, 1), ("Ev", 1, 1)),
                               lambda cfg: [(("window", None), 1, 1)] if cfg.window else []),
                         lambda cfg: [(("E", None), ("Ev", None))] + [
                             (("q_lens", i), ("k_lens", i)) + ((("window", None),) if cfg.window else ())
                             for i in range(len(cfg.q_lens))],
                         heads=("hq", "hkv")),
    "RopeConfig": Kind(_fields(("L", 1, 1), ("D", 4, 2), ("heads", 1, 1), ("batch", 1, 1))),
    "NormConfig": Kind(_join(_each("lead"), _each("normalized_shape")),
                       valid=_at_least_two("lead", "normalized_shape")),
}


def kind_of(cfg) -> Kind | None:
    for cls in type(cfg).__mro__:
        if cls.__name__ in KINDS:
            return KINDS[cls.__name__]
    return None


def _get(cfg, loc: Location) -> int:
    value = getattr(cfg, loc[0])
    return value if loc[1] is None else value[loc[1]]


def _with(cfg, values: dict[Location, int], heads: tuple[str, str] | None = None, group: int = 1):
    """``cfg`` with ``values`` set (and hq = group * hkv when ``heads``); None when it does not build."""
    changes: dict[str, Any] = {}
    for (field, i), v in values.items():
        if i is None:
            changes[field] = v
        else:
            items = list(changes.get(field, getattr(cfg, field)))
            items[i] = v
            changes[field] = tuple(items)
    if heads and heads[1] in changes:
        changes[heads[0]] = group * changes[heads[1]]
    try:
        return dataclasses.replace(cfg, **changes)
    except (TypeError, ValueError):
        return None


def _order(a: int, b: int) -> int:
    return (a > b) - (a < b)


def _keeps_orders(kind: Kind, original, candidate) -> bool:
    for group in kind.orders(original):
        for x in range(len(group)):
            for y in range(x + 1, len(group)):
                if _order(_get(original, group[x]), _get(original, group[y])) != \
                        _order(_get(candidate, group[x]), _get(candidate, group[y])):
                    return False
    return True


def _variables(kind: Kind, cfg) -> list[tuple[tuple[Location, ...], int, int]]:
    """The sizes to lower, each a tuple of locations that move together (equal sizes of one order
    group), with the lowest value and the step; ``("heads", None)`` stands for hkv (and hq)."""
    sizes = {loc: (low, step) for loc, low, step in kind.sizes(cfg)}
    if kind.heads:
        sizes[(kind.heads[1], None)] = (1, 1)
    out, taken = [], set()
    for loc, (low, step) in sizes.items():
        if loc in taken:
            continue
        tied = [loc] + [o for g in kind.orders(cfg) if loc in g for o in g
                        if o != loc and o in sizes and o not in taken and _get(cfg, o) == _get(cfg, loc)]
        tied = list(dict.fromkeys(tied))
        taken.update(tied)
        out.append((tuple(tied), max(sizes[t][0] for t in tied), max(sizes[t][1] for t in tied)))
    return out


def signature(failure) -> tuple:
    """What makes a smaller configuration's failure the same failure: its kind and the first line of
    its detail up to the first ':', numbers read as '#' ("dq with is_causal=True differs from the
    float64 reference" is another failure than "the gradient of a future key must be exactly 0"; a
    property's different checks fail with different first lines). As Hypothesis keeps a shrink on
    the same exception at the same place, a shrunk example here names the check that failed first."""
    lines = (getattr(failure, "detail", None) or str(failure)).strip().splitlines()
    head = lines[0].split(":")[0] if lines else ""
    return getattr(failure, "kind", None), re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", head).strip()


class Shrinker:
    """Replays a property on smaller configurations: ``fails(cfg)`` -> the failure (the same
    ``signature``) or None."""

    def __init__(self, replay: Callable[[Any], BaseException | None], original_failure):
        self.replay, self.signature = replay, signature(original_failure)
        self.tries, self.started, self.stopped = 0, time.monotonic(), False

    def fails(self, cfg):
        if self.tries >= MAX_TRIES or time.monotonic() - self.started > BUDGET_S:
            self.stopped = True
            return None
        self.tries += 1
        failure = self.replay(cfg)
        return failure if failure is not None and signature(failure) == self.signature else None

    def lower(self, kind: Kind, cfg, failure, variable, group: int):
        """The smallest value of one variable at which ``cfg`` still fails (binary search below its
        value, within its order groups); returns (cfg, failure), unchanged when none lower fails."""
        locs, low, step = variable
        now = _get(cfg, locs[0])
        below = [_get(cfg, o) for g in kind.orders(cfg) if any(loc in g for loc in locs) for o in g
                 if o not in locs and _get(cfg, o) < now]
        low = max([low] + [b + 1 for b in below])
        values = [v for v in range(low, now) if (v - low) % step == 0 and (now - v) % step == 0]
        lo, hi = 0, len(values)  # values[hi] (or now) fails; find the first index that fails
        best = (cfg, failure)
        while lo < hi and not self.stopped:
            mid = (lo + hi) // 2
            candidate = _with(cfg, {loc: values[mid] for loc in locs}, kind.heads, group)
            found = None
            if candidate is not None and _keeps_orders(kind, cfg, candidate) and kind.valid(cfg, candidate):
                found = self.fails(candidate)
            if found is not None:
                hi, best = mid, (candidate, found)
            else:
                lo = mid + 1
        return best


def shrink(cfg, failure, replay: Callable[[Any], BaseException | None]):
    """(smallest failing configuration, its failure, replays, stopped by the budget) from ``cfg``,
    which failed with ``failure``; ``cfg`` itself when its type has no ``Kind``."""
    kind = kind_of(cfg)
    shrinker = Shrinker(replay, failure)
    if kind is None:
        return cfg, failure, 0, False
    group = getattr(cfg, kind.heads[0]) // getattr(cfg, kind.heads[1]) if kind.heads else 1
    original = cfg
    for _ in range(ROUNDS):
        before = cfg
        for variable in _variables(kind, cfg):
            if shrinker.stopped:
                break
            cfg, failure = shrinker.lower(kind, cfg, failure, variable, group)
        if cfg == before or shrinker.stopped:
            break
    assert _keeps_orders(kind, original, cfg)
    return cfg, failure, shrinker.tries, shrinker.stopped


def boundary_failure(original_cfg, failure, replay: Callable[[Any], BaseException | None] | None,
                     why_not: str | None = None):
    """The failure to report for ``failure`` (a ``PropertyFailure``) found on the boundary example
    ``original_cfg``: the smallest configuration of its kind that still fails, or the example itself
    labelled "boundary example, not shrunk" (``why_not``: why no replay is tried)."""
    from harness.runner import PropertyFailure
    kind = kind_of(original_cfg)
    if why_not:
        cfg, found, tries, stopped = original_cfg, failure, 0, False
    else:
        with explain.quietly():  # (replays whose messages nobody reads: no costly explanations)
            cfg, found, tries, stopped = shrink(original_cfg, failure, replay)
        if cfg != original_cfg:  # the reported failure, replayed once with its explanation
            again = replay(cfg)
            found = again if again is not None and signature(again) == signature(found) else found
    budget = f"; stopped at its budget of {MAX_TRIES} replays or {BUDGET_S:g} s" if stopped else ""
    if cfg == original_cfg:
        why = why_not or (f"no smaller configuration of its kind fails ({tries} tried{budget})" if kind is not None
                          else f"{type(original_cfg).__name__} has no sizes to shrink here (suites/boundary.py)")
        note = f"boundary example (suites/regimes.py), not shrunk: {why}"
    else:
        note = (f"shrunk from the boundary example {original_cfg} (suites/regimes.py): the smallest configuration "
                f"of its kind that still fails ({tries} tried{budget})")
    return PropertyFailure(found.property, found.kind, found.target, f"{found.detail}\n  {note}", found.config,
                           found.repro, found.measured)
