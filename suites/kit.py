"""The suite kit: what a suite file needs from the harness, under one public import.

A property is a ``check_`` function and a thin Hypothesis test that ``run``s it (see
``harness/runner.py``); the target is reached only through the kit (the isolation rule in
notes/ARCHITECTURE.md)::

    from harness.suites.kit import SEED, impl, run

The model is array-api-tests' split: the strategies (``suites/strategies.py``, its
``hypothesis_helpers``) and the calls and assert helpers (here, its ``pytest_helpers``), one
import for both. Suite files import no other module's private (``_``-prefixed) names
(``tests/test_suite_kit.py``); a helper two suites share is public here or in a family's
``helpers.py``.

- calling the target: ``impl(target, name)`` (the guarded callable), ``submit(target, name, ...)``
  (the same call, its result read later with ``.result()`` or ``resolved(x)``: compute the
  reference in between, which a worker overlaps with the target's call; ``submit_call`` for a
  handle such as a module, ``submit_on_target`` for ``on_target``), ``on_target(target, fn, ...)``
  (a module-level function run where the target lives), ``move(target, mod, name, device=...)``
  (a module's ``.to``), ``call_each`` (a statistical loop in
  batched requests), ``call_under_autocast``, ``manual_seed`` (seed where the target lives);
- running a property: ``run(target, check, cfg)``, ``record_label``, ``require_features``,
  ``within_declarations``, ``verified`` / ``unverified`` (a fixed grid checked once per target),
  ``UNSUPPORTED`` / ``Unsupported``;
- asserting: ``expect_tensor`` (type, shape, dtype, device of an output), ``ImplementationError``
  (the target raised, hung or broke a call rule), ``check_convention`` / ``KNOWN`` /
  ``ConventionMismatch`` (a measured convention against the declared one), ``is_module``;
  numerical comparisons go through ``harness.spec.tolerance`` (``assert_close``);
- drawing: ``SEED``, ``DTYPE``, ``autocast_dtypes`` (``suites/strategies.py``).
"""
from __future__ import annotations

from harness.spec.conventions import KNOWN, ConventionMismatch, check_convention
from harness.boundary.guard import ImplementationError, expect_tensor
from harness.boundary.handles import is_module
from harness.boundary.pending import resolved
from harness.runner import (UNSUPPORTED, Unsupported, call_each, call_under_autocast, impl, move, on_target,
                            record_label, require_features, run, submit, submit_call, submit_on_target,
                            unverified, verified, within_declarations)
from harness.boundary.target_ops import manual_seed
from harness.suites.strategies import DTYPE, SEED, autocast_dtypes

__all__ = ["ConventionMismatch", "DTYPE", "ImplementationError", "KNOWN", "SEED", "UNSUPPORTED",
           "Unsupported", "autocast_dtypes", "call_each", "call_under_autocast", "check_convention",
           "expect_tensor", "impl", "is_module", "manual_seed", "move", "on_target", "record_label",
           "require_features", "resolved", "run", "submit", "submit_call", "submit_on_target", "unverified",
           "verified", "within_declarations", "under_convention"]


def under_convention(target, key: str, against, what: str) -> None:
    """Hold the target to ``against(value)`` (raises AssertionError when the output disagrees) under
    the convention ``key`` it declares (else the protocol's default), and record the label. Where
    only another known value agrees, the mismatch is named (``check_convention`` raises
    ``ConventionMismatch``), not reported as a bug; where none does, the declared value's failure is."""
    declared = target.conventions.get(key, KNOWN[key].default)
    try:
        against(declared)
    except AssertionError as exc:
        other = next(value for value in KNOWN[key].values if value != declared)
        try:
            against(other)
        except AssertionError:
            raise exc from None
        check_convention(key, other, target.conventions, f"\n  {what}")
    record_label(target, check_convention(key, declared, target.conventions))
