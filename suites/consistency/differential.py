"""The engine of the differential checks: the session's targets (several ``--impl``, e.g. one
library's backends) held to each other, as torch's fused SDPA backends are checked against its
math backend.

Each test is one protocol name. It runs only when two or more loaded targets define it; it draws
a configuration, calls every such target on the same seeded inputs, the way a model calls the
name (the protocol's defaults left to the target: the per-target suites mostly pass every
argument explicitly, so a default one backend gets wrong can pass them all), and compares each
output with the first target's. Two outputs that are each within the tolerance policy of the
float64 reference are within twice its allowance of each other; more is a disagreement. Buckets
(integers) must be equal, except where the float32 logarithm lands within 1e-4 of a bucket
boundary (as ``t5_bucket``); ALiBi is compared up to the per-row constant softmax ignores, on the
causal keys. A disagreement is reported in the consistency section (the test is xfailed) and
fails only with ``--require-consistent``. A target that raises on an input is left out of that
comparison (its own suites report it); a configuration a target does not support is compared
among the others.

    shape notation: q (B, Hq, L, E), k (B, Hkv, S, E), v (B, Hkv, S, Ev); x (B, H, L, D)

Each family declares its compared names' ``Case``s (``CASES`` in ``suites/<family>/specs.py``, one
per record with ``compared``; ``declared_cases`` gathers them) and ``test_consistency.py`` runs them;
this module holds what they share: ``Case``, the judges' yardstick (``policy``), calling every target
alike (``outputs``) and holding each output to the first target's (``assert_consistent``), and the
test's body (``outputs_agree``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

import pytest
import torch
from hypothesis import assume
from hypothesis import strategies as st

from harness.spec import protocol, tolerance
from harness.spec.conventions import KNOWN
from harness.boundary.target_import import BrokenTarget, Missing
from harness.suites.consistency.models import NotComparable
from harness.suites.kit import ImplementationError, impl


@dataclass(frozen=True)
class Case:
    """One protocol name's differential check.

    ``calls(cfg, device)``: [(label, args, kwargs)], the calls made on every target;
    ``judge(cfg, label, args, kwargs, out_dtype)``: (transform of an output to the compared tensor, float64 CPU;
    what two compared outputs may differ by, or None for "exactly, except where ``exempt``");
    ``exempt``: (cfg, label, args) -> bool mask of entries either value may take (or None);
    ``out_dtype``: the least precise floating dtype the compared targets returned (the yardstick's);
    ``invoke``: how one target is called (modules: built alike, then called)."""

    configs: st.SearchStrategy
    calls: Callable
    judge: Callable
    exempt: Callable | None = None
    #: (target, name, cfg, args, kwargs) -> output; default: the name called on copies of the tensors
    #: (a target that writes into an argument, as attention_with_kvcache does, writes into its own);
    #: None: the target does not support this call (it is compared on the others)
    invoke: Callable | None = None
    #: label -> the label of the call whose output (the first target's) it is compared with instead
    #: of its own (the paged call against the linear one: the same logical contents)
    against: dict[str, str] | None = None


def as_float64(out) -> torch.Tensor:
    """An output as the compared tensor: float64 on the CPU (ImplementationError if not a Tensor)."""
    if not isinstance(out, torch.Tensor):
        raise ImplementationError(f"returned {type(out).__name__}, expected a Tensor")
    return out.detach().cpu().to(torch.float64)


def policy(truth, naive, dtype):
    """2 x the policy's allowance (each output may be off the float64 truth by one)."""
    return 2 * tolerance.allowance(truth, naive, dtype=dtype)


def exact(cfg, label, args, kwargs, out_dtype):
    """A judge: outputs compared as float64, equal (except where the case's ``exempt`` says)."""
    return (lambda out: as_float64(out)), None


def declared_cases(families=None) -> dict[str, Case]:
    """name -> Case of every family's ``specs.CASES`` (families and names in the records' order); a
    Case declared outside its name's family is an error."""
    found: dict[str, Case] = {}
    for family in families or protocol.FAMILIES:
        for name, case in getattr(importlib.import_module(f"harness.suites.{family}.specs"), "CASES", {}).items():
            if protocol.NAMES[name].family != family:
                raise ValueError(f"the Case of {name} is declared in suites/{family}/specs.py, not its family's")
            found[name] = case
    return {n: found[n] for n in protocol.NAMES if n in found}


def sharing(targets, name: str) -> list:
    """The loaded targets that define ``name`` (a broken one is its own suites' failure)."""
    out = []
    for t in targets:
        try:
            t.lookup(name)
        except (Missing, BrokenTarget):
            continue
        out.append(t)
    return out


def _copied(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


def call_function(target, name: str, cfg, args, kwargs):
    return impl(target, name)(*[_copied(a) for a in args], **{k: _copied(v) for k, v in kwargs.items()})


def outputs(targets, name: str, cfg, case: Case, calls) -> list[tuple[object, list]]:
    """[(target, [output per call])] for the targets whose every call returned."""
    invoke, got = case.invoke or call_function, []
    for t in targets:
        try:
            got.append((t, [invoke(t, name, cfg, args, kwargs) for _, args, kwargs in calls]))
        except ImplementationError:
            continue  # (raised, timed out, crashed: the target's own suites report it)
    return got


def least_precise(outs) -> torch.dtype:
    """Of the outputs' floating dtypes, the one with the largest eps (float32 if none floats)."""
    dtypes = [o.dtype for o in outs if isinstance(o, torch.Tensor) and o.dtype.is_floating_point]
    return max(dtypes, key=lambda d: torch.finfo(d).eps, default=torch.float32)


def assert_consistent(name: str, cfg, case: Case, calls, results) -> None:
    """Each target's outputs against the first target's (a call ``case.against`` names: every
    target's, the first's too, against the first target's output of the call named); AssertionError
    on a disagreement."""
    (first, base), rest = results[0], results[1:]
    labels = [label for label, _, _ in calls]
    for i, (label, args, kwargs) in enumerate(calls):
        j = labels.index((case.against or {}).get(label, label))
        view, allowed = case.judge(cfg, label, args, kwargs, least_precise([base[j]] + [o[i] for _, o in results]))
        a = view(base[j])
        exempt = case.exempt(cfg, label, args, kwargs) if case.exempt else None
        for other, outs in (results if j != i else rest):
            if outs[i] is None:  # (a call this target does not support)
                continue
            b = view(outs[i])
            if a.shape != b.shape:
                raise AssertionError(f"{first.spec} and {other.spec} give {name} ({label}) outputs of shapes "
                                     f"{tuple(a.shape)} and {tuple(b.shape)}; config {cfg.to_json()}")
            same_nan = torch.isnan(a) & torch.isnan(b)
            diff = (a - b).abs().masked_fill(same_nan | (a == b), 0).nan_to_num(float("inf"))
            if exempt is not None:
                diff = diff.masked_fill(exempt, 0)
            worst = float(diff.max()) if diff.numel() else 0.0
            if worst > (allowed or 0.0):
                idx = tuple(int(v) for v in (diff == diff.max()).nonzero()[0])
                bound = f"allowed {allowed:.3e} (twice the tolerance policy's allowance)" if allowed else \
                    "they must be equal"
                raise AssertionError(
                    f"{name} ({label}) at {idx}: {first.spec} {float(a[idx]):.6g}, {other.spec} {float(b[idx]):.6g}; "
                    f"max |difference| {worst:.3e}, {bound}{declared_differently(first, other)}; "
                    f"config {cfg.to_json()}")


#: conventions the differential reads away (each target called in its declared layout)
READ_AWAY = ("rope_layout", "sinusoidal_layout")


def declared_differently(a, b) -> str:
    """``"; they declare different conventions, which may explain it: window_extent w vs w+1"``
    for two targets whose declared conventions (or the protocol's defaults) differ, else ``""``:
    a disagreement between backends that follow different named conventions is named as such."""
    found = []
    for key, convention in KNOWN.items():
        va, vb = (t.conventions.get(key, convention.default) for t in (a, b))
        if key not in READ_AWAY and va and vb and va != vb:
            found.append(f"{key} {va} vs {vb}")
    return f"; they declare different conventions, which may explain it: {', '.join(found)}" if found else ""


def outputs_agree(loaded_targets, name: str, data, cases: dict[str, Case], skipped: dict[str, str]) -> None:
    """The test body: the targets that define ``name`` give the same outputs on the same inputs
    (``cases[name]``), or the test skips with why (``skipped``: the names not compared)."""
    if len(loaded_targets) < 2:
        pytest.skip("a differential check needs two or more loaded --impl targets")
    targets = sharing(loaded_targets, name)
    if len(targets) < 2:
        pytest.skip(f"fewer than two targets define {name}")
    if name in skipped:
        pytest.skip(f"not compared: {skipped[name]}")
    case = cases[name]
    cfg = data.draw(case.configs, label="cfg")
    supported = [t for t in targets if t.supports(cfg)]
    assume(len(supported) >= 2)  # (declared dtypes / sizes: compared where two take the config)
    calls = case.calls(cfg, supported[0].device)
    try:
        results = outputs(supported, name, cfg, case, calls)
    except NotComparable as exc:
        pytest.skip(f"not comparable: {exc}")
    assume(len(results) >= 2)
    assert_consistent(name, cfg, case, calls, results)
