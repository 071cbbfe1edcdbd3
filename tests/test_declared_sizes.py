"""``HARNESS_SIZES``: a kernel that supports only some sizes (head dims that are multiples of 8, as
FlashAttention-style kernels need) declares them; configurations outside are not drawn for it,
as with ``HARNESS_DTYPES``. Undeclared, the same kernel fails on the sizes it refuses."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.boundary.loader import load_target
from tests.planted_support import run_suite

pytest_plugins = ["pytester"]

KERNEL = '''
import torch.nn.functional as F
{declaration}

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    if query.shape[-1] % 8 or value.shape[-1] % 8:
        raise ValueError(f"head dims must be multiples of 8, got {{query.shape[-1]}} and {{value.shape[-1]}}")
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
'''
DECLARED = 'HARNESS_SIZES = {"E": range(8, 257, 8), "Ev": range(8, 257, 8)}'


def _kernel(tmp_path, name, declaration):
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL.format(declaration=declaration))
    return path


def test_declared_sizes_are_not_drawn(pytester, tmp_path):
    declared = _kernel(tmp_path, "kernel_e8_declared", DECLARED)
    result = run_suite(pytester, ["test_attention.py"], [declared])
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) >= 6, result.stdout.str()[-3000:]
    assert "declared sizes: E in range(8, 257, 8), Ev in range(8, 257, 8)" in result.stdout.str()


def test_the_same_kernel_undeclared_fails_on_the_sizes_it_refuses(pytester, tmp_path):
    undeclared = _kernel(tmp_path, "kernel_e8_undeclared", "")
    result = run_suite(pytester, ["test_attention.py"], [undeclared], "agreement or scale")
    out = result.stdout.str()
    assert result.parseoutcomes().get("failed", 0) >= 1, out[-3000:]
    assert "head dims must be multiples of 8" in out


def test_supports_reads_dtypes_and_sizes(tmp_path):
    target = load_target(str(_kernel(tmp_path, "kernel_e8_unit", DECLARED)))
    cfg = SimpleNamespace(E=16, Ev=8, dtype="float32")
    assert target.supports(cfg)
    assert not target.supports(SimpleNamespace(E=12, Ev=8, dtype="float32"))
    assert target.supports(SimpleNamespace(L=3, dtype="float32"))  # fields it does not constrain
    bad = tmp_path / "kernel_bad_sizes.py"
    bad.write_text(KERNEL.format(declaration='HARNESS_SIZES = {"E": 8}'))
    assert "broken declaration: HARNESS_SIZES['E'] = 8: expected a range or a set of ints" \
        in load_target(str(bad)).load_error
