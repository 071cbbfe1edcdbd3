"""The gradient suites catch real backward bugs: each planted target in ``tests/planted/grad/``
has a correct forward and ONE wrong hand-written backward hook (on top of ``_base.py``), and
fails exactly the property named for it, with the property's name and a repro line. Controls:
``reference``, ``torch.nn.functional`` / ``torch.nn``, the correct custom-backward target and a
correct bottom-right kernel with NaN rows pass every gradient property; the Hugging Face (and,
when installed, torchtune and x-transformers) adapters pass with conventions only, gradcheck
``unsupported`` for them (no float64); a target without a backward is reported
``unsupported (no backward``.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from planted_support import conformance, run_suite, suite_tests

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "grad"
GRAD_SUITES = ["test_attention_grad.py", "test_dropout_grad.py", "test_norm_grad.py", "test_position_grad.py",
               "test_window_grad.py"]
CORRECT = PLANTED / "correct_custom_backward.py"
#: correct, with NaN rows where a bottom-right causal query sees no key (L > S)
BOTTOM_RIGHT_NAN = PLANTED / "attn_bottom_right_nan_rows.py"


#: (suite, correct targets that must pass every property of it they define the names for)
CONTROLS = [("test_attention_grad.py", ["reference", "torch.nn.functional", CORRECT, BOTTOM_RIGHT_NAN]),
            ("test_dropout_grad.py", ["reference", "torch.nn.functional", CORRECT]),
            ("test_norm_grad.py", ["reference", "torch.nn", CORRECT]),
            ("test_position_grad.py", ["reference", CORRECT]),
            ("test_window_grad.py", ["reference", CORRECT])]
#: (property, target) cells skipped because the target lacks the protocol name
LACKS = {("norm_grad.residual_block", "torch.nn")}


def assert_controls_pass(result, cells: dict, lacks, unsupported=frozenset()) -> None:
    """No failure or error; every cell ``pass`` or ``convention:...``, but for the (property,
    target) pairs in ``lacks`` (skipped: the target has no such name) and ``unsupported``
    (``unsupported (declared: ...``, e.g. gradcheck without float64)."""
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-4000:]
    for key, cell in cells.items():
        if key in lacks:
            assert cell.startswith("skipped (target") and "has no attribute" in cell, (key, cell)
        elif key in unsupported:
            assert cell.startswith("unsupported (declared: "), (key, cell)
        else:
            assert cell == "pass" or cell.startswith("convention:"), (key, cell)


@pytest.mark.parametrize("suite,impls", CONTROLS, ids=[c[0].removesuffix(".py") for c in CONTROLS])
def test_correct_targets_pass_every_gradient_property(pytester, tmp_path, suite, impls):
    """reference, torch (SDPA's and nn.LayerNorm/RMSNorm's own backwards), the hand-written
    custom-backward target and the bottom-right kernel with NaN rows pass every gradient property
    of the suite (torch.nn has no residual_block)."""
    report = tmp_path / "report"
    result = run_suite(pytester, [suite], impls, None, "--conformance-report", str(report))
    cells = conformance(report)
    assert len(cells) == len(impls) * len(suite_tests(suite))
    # (NaN rows spread into dk and dv: the backward of declared NaN rows is reported unsupported)
    assert_controls_pass(result, cells, LACKS, {("attention_grad.fully_masked_rows", str(BOTTOM_RIGHT_NAN))})
    if suite == "test_attention_grad.py":
        assert cells[("attention_grad.gradcheck", str(BOTTOM_RIGHT_NAN))] == "pass"
        assert cells[("attention_grad.causal", str(BOTTOM_RIGHT_NAN))] == "pass"


def test_bottom_right_nan_rows_pass_gradcheck_with_l_greater_than_s():
    """gradcheck's explicit example (L = 5 > S = 3, its seed draws the causal variant) swaps L and S:
    the correct bottom-right kernel's NaN rows for queries that see no key are no false alarm."""
    import torch

    from harness.boundary.loader import load_target
    from harness.suites.attention.test_attention_grad import CAUSAL_L_GT_S as cfg
    from harness.suites.attention.test_attention_grad import check_gradcheck
    assert cfg.L > cfg.S and int(torch.randint(4, (1,), generator=cfg.generator(6))) == 1  # is_causal
    target = load_target(str(BOTTOM_RIGHT_NAN), isolation="none")
    try:
        check_gradcheck(target, cfg)
    finally:
        target.close()


#: Hugging Face adapters as gradient controls: (suites, adapter, (property, reason) cells that are
#: not a pass): names an adapter lacks are skipped; their float64 gradcheck is unsupported
HF_GRAD = [
    pytest.param(["test_attention_grad.py", "test_dropout_grad.py"], "harness.adapters.hf_attention",
                 {"attention_grad.gradcheck": "unsupported"}, id="hf_attention"),
    pytest.param(["test_attention_grad.py", "test_dropout_grad.py"], "harness.adapters.hf_bert_attention", {},
                 id="hf_bert_attention"),
    pytest.param(["test_norm_grad.py"], "harness.adapters.hf_llama_rmsnorm",
                 {"norm_grad.layernorm": "lacks", "norm_grad.shift_invariance": "lacks",
                  "norm_grad.residual_block": "lacks", "norm_grad.gradcheck": "unsupported"}, id="hf_llama_rmsnorm"),
    pytest.param(["test_norm_grad.py"], "harness.adapters.hf_t5_layernorm",
                 {"norm_grad.layernorm": "lacks", "norm_grad.shift_invariance": "lacks",
                  "norm_grad.residual_block": "lacks", "norm_grad.gradcheck": "unsupported"}, id="hf_t5_layernorm"),
    pytest.param(["test_norm_grad.py"], "harness.adapters.hf_gemma_rmsnorm",
                 {"norm_grad.layernorm": "lacks", "norm_grad.shift_invariance": "lacks",
                  "norm_grad.residual_block": "lacks", "norm_grad.gradcheck": "unsupported"}, id="hf_gemma_rmsnorm"),
    pytest.param(["test_position_grad.py"], "harness.adapters.hf_positions",
                 {"position_grad.embedding_sum": "lacks", "position_grad.gradcheck": "unsupported"}, id="hf_positions"),
    # optional libraries (README command 1 installs neither: skipped there, required in CI)
    pytest.param(["test_position_grad.py"], "harness.adapters.torchtune_positions",
                 {"position_grad.embedding_sum": "lacks", "position_grad.gradcheck": "unsupported"},
                 id="torchtune_positions", marks=pytest.mark.optional_libs("torchtune")),
    pytest.param(["test_position_grad.py"], "harness.adapters.xtransformers_positions",
                 {"position_grad.gradcheck": "unsupported"},
                 id="xtransformers_positions", marks=pytest.mark.optional_libs("x_transformers")),
]


@pytest.mark.parametrize("suites,adapter,cells", HF_GRAD)
def test_library_adapters_pass_the_gradient_suites(pytester, tmp_path, suites, adapter, cells):
    """The libraries' own backwards (autograd through HF eager attention, HF norms, the RoPE of
    transformers, torchtune and x-transformers), held to the protocol by the adapters, pass every
    gradient property with conventions only."""
    pytest.importorskip("transformers")
    report = tmp_path / "report"
    result = run_suite(pytester, suites, [adapter], None, "--conformance-report", str(report))
    got = conformance(report)
    assert len(got) == sum(len(suite_tests(s)) for s in suites)
    assert_controls_pass(result, got, {(p, adapter) for p, why in cells.items() if why == "lacks"},
                         {(p, adapter) for p, why in cells.items() if why == "unsupported"})


NO_BACKWARD = {  # target source -> the start of its cells
    "detached": ("import torch.nn.functional as F\n\n"
                 "def scaled_dot_product_attention(query, key, value, **kw):\n"
                 "    return F.scaled_dot_product_attention(query, key, value, **kw).detach()\n",
                 "unsupported (no backward: the output has no grad_fn"),
    "raises": ("import torch\nimport torch.nn.functional as F\n\n"
               "class Fn(torch.autograd.Function):\n"
               "    @staticmethod\n"
               "    def forward(ctx, q, k, v, kw):\n"
               "        return F.scaled_dot_product_attention(q, k, v, **kw)\n"
               "    @staticmethod\n"
               "    def backward(ctx, g):\n"
               "        raise NotImplementedError('inference-only kernel')\n\n"
               "def scaled_dot_product_attention(query, key, value, **kw):\n"
               "    return Fn.apply(query, key, value, kw)\n",
               "unsupported (no backward: its backward raised NotImplementedError: inference-only kernel"),
    "declared": ("from torch.nn.functional import scaled_dot_product_attention  # noqa: F401\n"
                 "HARNESS_UNSUPPORTED = {'backward'}\n",
                 "unsupported (declared: a backward pass"),
}


@pytest.mark.parametrize("kind", list(NO_BACKWARD))
def test_a_target_without_backward_is_unsupported(pytester, tmp_path, kind):
    """A forward-only kernel (output without grad_fn, a backward raising NotImplementedError, or
    ``HARNESS_UNSUPPORTED = {"backward"}``) is reported ``unsupported (...)``, never a failure."""
    source, cell = NO_BACKWARD[kind]
    target = tmp_path / f"forward_only_{kind}.py"
    target.write_text(source)
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_attention_grad.py"], [target], "test_agreement or test_gqa",
                       "--conformance-report", str(report))
    result.assert_outcomes(skipped=2)
    for (prop, _), got in conformance(report).items():
        assert got.startswith(cell), (prop, got)


def test_a_nondeterministic_backward_is_named(pytester, tmp_path):
    """The random-order dQ of ``attn_dq_atomic_order.py``, declared nondeterministic (on the command
    line, over its file's ``deterministic``), passes as ``convention:nondeterministic`` with its spread."""
    report = tmp_path / "report"
    bug = PLANTED / "attn_dq_atomic_order.py"
    result = run_suite(pytester, ["test_attention_grad.py"], [bug], "test_deterministic",
                       "--convention", "backward_determinism=nondeterministic", "--conformance-report", str(report))
    result.assert_outcomes(passed=1)
    cell = conformance(report)[("attention_grad.deterministic", str(bug))]
    assert cell.startswith("convention:nondeterministic (max spread "), cell
