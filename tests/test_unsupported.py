"""Declaring what a kernel does not support (issue 11): ``HARNESS_UNSUPPORTED`` and an undeclared
``NotImplementedError`` are reported ``unsupported (...)`` -- never a bug, never a pass -- and the
properties that do not need the feature still run and pass."""
from __future__ import annotations

import re

import pytest

from tests.planted_support import conformance, run_suite

pytest_plugins = ["pytester"]

#: a kernel with no dropout and no arbitrary attn_mask (FlashAttention's interface)
FLASH_LIKE = '''
import torch.nn.functional as F
{declaration}

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    if attn_mask is not None:
        raise NotImplementedError("arbitrary attn_mask is not supported by this kernel")
    if dropout_p:
        raise NotImplementedError("dropout is not supported by this kernel")
    return F.scaled_dot_product_attention(query, key, value, is_causal=is_causal, scale=scale,
                                          enable_gqa=enable_gqa)
'''


def _kernel(tmp_path, name, declaration=""):
    path = tmp_path / f"{name}.py"
    path.write_text(FLASH_LIKE.format(declaration=declaration))
    return path


def test_declared_unsupported_features_are_named_not_failed(pytester, tmp_path):
    kernel = _kernel(tmp_path, "flash_declared", 'HARNESS_UNSUPPORTED = {"attn_mask", "dropout"}')
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_attention_masks.py", "test_attention_dropout.py"], [kernel], None,
                       "--conformance-report", str(report))
    out = result.stdout.str()
    assert "declared unsupported: attn_mask, dropout" in out
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0, out[-3000:]
    cells = conformance(report)
    for prop in ("attention.bool_mask", "attention.float_mask", "attention.mask_shapes",
                 "attention.dropout_keep_rate", "attention.dropout_seeded"):
        cell = cells[(prop, str(kernel))]
        assert cell.startswith("unsupported (declared:"), (prop, cell)
    assert cells[("attention.causal", str(kernel))].startswith("convention:"), "causal needs no mask: it runs"


def test_an_undeclared_not_implemented_error_is_unsupported_not_a_pass(pytester, tmp_path):
    kernel = _kernel(tmp_path, "flash_undeclared")
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_attention_masks.py"], [kernel], "test_bool_mask or test_causal",
                       "--conformance-report", str(report))
    result.assert_outcomes(passed=1, skipped=1)
    cells = conformance(report)
    cell = cells[("attention.bool_mask", str(kernel))]
    assert cell.startswith("unsupported (undeclared: raised NotImplementedError: arbitrary attn_mask"), cell
    assert "HARNESS_UNSUPPORTED" in cell
    summary = result.stdout.str()
    assert "unsupported without a declaration (NotImplementedError)" in summary
    assert f"attention.bool_mask [{kernel}]: unsupported (undeclared" in summary


@pytest.mark.parametrize("declaration,message", [
    ('HARNESS_UNSUPPORTED = "dropout"', "expected a set of feature names"),
    ('HARNESS_UNSUPPORTED = {"flash"}', "unknown feature(s) ['flash']"),
])
def test_a_broken_unsupported_declaration_does_not_load(tmp_path, declaration, message):
    from harness.boundary.loader import load_target
    target = load_target(str(_kernel(tmp_path, "broken", declaration)))
    assert target.load_error and message in target.load_error, target.load_error


#: a kernel without float32 (as FlashAttention), which it does not declare, and a bug on the
#: configurations it does take: the scale is 1/E instead of 1/sqrt(E)
HEAD_DIM_LIMITED = '''
import math
import torch
import torch.nn.functional as F
{declaration}

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    if query.dtype == torch.float32:
        raise NotImplementedError("float32 inputs are not supported by this kernel")
    if scale is None:
        scale = {default_scale}
    return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                          is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
'''


def _limited(tmp_path, name, default_scale, declaration=""):
    path = tmp_path / f"{name}.py"
    path.write_text(HEAD_DIM_LIMITED.format(declaration=declaration, default_scale=default_scale))
    return path


def test_a_bug_on_the_supported_configs_is_still_caught(pytester, tmp_path):
    """Per configuration, not per property: before, the first configuration the kernel refused
    (the tile-boundary regime starts in float32) skipped the whole property as 'unsupported',
    and the wrong scale on every float16 / bfloat16 configuration went unseen."""
    kernel = _limited(tmp_path, "limited_buggy", "1.0 / query.shape[-1]")
    result = run_suite(pytester, ["test_attention.py"], [kernel], "test_scale")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "[attention.scale] property violated" in out, out[-3000:]


def test_passed_over_configs_are_counted_in_the_cell_and_the_summary(pytester, tmp_path):
    kernel = _limited(tmp_path, "limited_correct", "1.0 / math.sqrt(query.shape[-1])")
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_attention.py"], [kernel], "test_scale or test_multi_head",
                       "--conformance-report", str(report))
    result.assert_outcomes(passed=2)
    cells = conformance(report)
    for prop in ("attention.scale", "attention.multi_head"):
        cell = cells[(prop, str(kernel))]
        assert re.fullmatch(r"pass; \d+ of \d+ configs unsupported \(NotImplementedError\)", cell), cell
    summary = result.stdout.str()
    assert "unsupported without a declaration (NotImplementedError)" in summary
    line = next(ln for ln in summary.splitlines() if ln.startswith(f"attention.scale [{kernel}]: "))
    assert "configs unsupported (undeclared: raised NotImplementedError: float32 inputs" in line, line
    assert "e.g. config AttnConfig(" in line and "dtype='float32'" in line, line



def test_a_partly_supported_property_is_counted_partial_in_the_summary_line():
    from harness.verdicts.conformance_table import summary_lines
    rows = [{"property": "attention.scale", "target": "k", "when": "call", "outcome": "passed", "label": None,
             "reason": "", "unsupported": "3 of 33 configs unsupported (NotImplementedError)"},
            {"property": "attention.gqa", "target": "k", "when": "call", "outcome": "passed", "label": None,
             "reason": ""}]
    assert summary_lines(rows) == ["k: pass 1, convention 0, partial 1, fail 0, unsupported 0, skipped 0"]


#: a correct RoPE that declares float32 only (as a wrapper of rotary-embedding-torch 0.2.7 or 0.8.3
#: may): rope.autocast draws only half dtypes, so it has nothing to draw for this target
FLOAT32_ROPE = '''
HARNESS_DTYPES = ("float32",)
from harness.reference.rope import apply_rotary_embedding as _reference


def apply_rotary_embedding(x, positions, base=10000.0):
    return _reference(x, positions, base)
'''

#: a property whose check rejects every configuration for a reason of its own (not a declaration)
NEVER_SATISFIED = '''
import pytest
from hypothesis import assume, given
from harness.runner import run
from harness.suites.positions.configs import rope_configs

PROPERTY_PREFIX = "unsat"
pytestmark = pytest.mark.needs("apply_rotary_embedding")


def check_never(target, cfg):
    assume(False)


@given(cfg=rope_configs())
def test_never(target, cfg):
    run(target, check_never, cfg)
'''


def test_a_declaration_that_leaves_nothing_to_draw_is_unsupported_not_unsatisfiable(pytester, tmp_path):
    """Every configuration rope.autocast draws has a half dtype, which the target's HARNESS_DTYPES
    excludes: the cell reads unsupported (declared: ...), never Hypothesis' Unsatisfiable; the
    properties with float32 draws still run and pass."""
    rope = tmp_path / "float32_rope.py"
    rope.write_text(FLOAT32_ROPE)
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_rope.py"], [rope], "test_autocast or test_agreement",
                       "--conformance-report", str(report))
    out = result.stdout.str()
    result.assert_outcomes(passed=1, skipped=1)
    assert "Unsatisfiable" not in out, out[-3000:]
    cells = conformance(report)
    assert cells[("rope.autocast", str(rope))].startswith("unsupported (declared: HARNESS_DTYPES"), cells
    assert cells[("rope.agreement", str(rope))] == "convention:interleaved"


def test_a_genuinely_unsatisfiable_property_is_still_reported(pytester, tmp_path):
    """Some draws are excluded by the declaration, the rest by the check's own assume(): the
    property is not unsupported but unsatisfiable, and is failed as such."""
    rope, suite = tmp_path / "float32_rope.py", tmp_path / "never_suite.py"
    rope.write_text(FLOAT32_ROPE)
    suite.write_text(NEVER_SATISFIED)
    result = run_suite(pytester, [suite], [rope])
    result.assert_outcomes(failed=1)
    assert "Unsatisfiable" in result.stdout.str()
