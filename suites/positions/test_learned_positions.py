"""Learned absolute position embedding conformance.

    LearnedPositionEmbedding(max_positions, dim): a table (max_positions, dim): its ``.weight``, or
        else its one parameter of that shape (``harness.boundary.module_tensors``, as every property reads it)
    forward(positions) = weight[positions]   (..., dim)

The seed's caveat: a learned table only knows the positions it was trained on, so
a position >= max_positions has no embedding and must raise, never be clamped to
the last row or wrapped around.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given
from torch import nn

from harness.spec import tolerance
from harness.boundary import guard, module_tensors
from harness.suites.positions.configs import learned_configs
from harness.suites.kit import ImplementationError, expect_tensor, impl, is_module, move, on_target, run

PROPERTY_PREFIX = "learned_positions"
LPE = "LearnedPositionEmbedding"
pytestmark = pytest.mark.needs(LPE)


def table_path(target, mod, cfg) -> str:
    """The dotted path of the module's (max_positions, dim) table (``module_tensors``)."""
    return on_target(target, module_tensors.locate, mod, LPE, "table", (cfg.max_positions, cfg.dim))


def build(target, cfg) -> tuple[nn.Module, torch.Tensor]:
    """The target's module with a random table written into it (``module_tensors``: its .weight, or
    its one parameter of that shape); returns (module, table in the table's dtype)."""
    mod = impl(target, LPE)(cfg.max_positions, cfg.dim)
    if not is_module(mod):
        raise ImplementationError(f"{LPE}({cfg.max_positions}, {cfg.dim}) returned {type(mod).__name__}, "
                                  f"expected an nn.Module")
    mod = move(target, mod, LPE, device=target.device)
    table = cfg.table()
    _, dtype = on_target(target, module_tensors.write, mod, LPE, "table", table)
    return mod, table.to(dtype)


def lookup(target, mod, positions):
    with torch.no_grad():
        return guard.call(target.limit, mod, f"{LPE}.forward", positions)


def check_lookup(target, cfg):
    """forward(positions) is the table's rows: weight[positions], shape (*positions.shape, dim),
    for (L,) and (B, L) positions including the last row max_positions - 1."""
    mod, table = build(target, cfg)
    pos = cfg.positions(target.device)
    out = expect_tensor(lookup(target, mod, pos), LPE, (*pos.shape, cfg.dim), table.dtype, pos.device)
    tolerance.assert_close(out, table.double()[pos.cpu()], dtype=table.dtype,
                           what=f"the embedding of positions {tuple(pos.shape)} (must be weight[positions])")


def check_out_of_range(target, cfg):
    """A position >= max_positions (exactly max_positions, a little over, far over) raises,
    even when every other position is in range: no clamping, no wrapping."""
    mod, table = build(target, cfg)
    for bad in (cfg.max_positions, cfg.max_positions + 3, 10 * cfg.max_positions + 7):
        pos = cfg.positions(target.device).clone()
        pos.view(-1)[0] = bad
        try:
            out = lookup(target, mod, pos)
        except ImplementationError as exc:
            if exc.__cause__ is not None:  # it raised: correct
                continue
            raise
        row = out.reshape(-1, cfg.dim)[0].detach().double().cpu() if isinstance(out, torch.Tensor) else None
        how = ""
        if row is not None and row.shape == (cfg.dim,):
            clamped = torch.equal(row, table[cfg.max_positions - 1].double())
            wrapped = torch.equal(row, table[bad % cfg.max_positions].double())
            kind = ("clamped or wrapped around" if clamped and wrapped else "clamped" if clamped
                    else "wrapped around" if wrapped else "")
            how = f" (it returned row {cfg.max_positions - 1 if clamped else bad % cfg.max_positions}: {kind})" \
                if kind else ""
        raise AssertionError(f"position {bad} with max_positions={cfg.max_positions} returned an "
                             f"embedding{how}; positions outside the table must raise")


@given(cfg=learned_configs())
def test_lookup(target, cfg):
    run(target, check_lookup, cfg)


@given(cfg=learned_configs())
def test_out_of_range(target, cfg):
    run(target, check_out_of_range, cfg)
