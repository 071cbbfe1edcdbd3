"""Triton targets on a CPU (``harness.boundary.interpret``): the profile fitted to the kernel's tiles, the
detection of an interpreted target, and the one-line load error without triton. Fast: the
targets here are tiny files; ``test_planted_triton.py`` runs real kernels under the interpreter."""
from __future__ import annotations

import os

import pytest
import torch

import harness.spec.configs as configs
from harness.boundary import interpret
from harness.suites import regimes
from harness.boundary.loader import load_target

configs.load_families()


def test_fit_maps_the_generic_regime_to_the_kernels_boundaries():
    tiles = (64,)
    assert [interpret.shrink(v, tiles) for v in (1, 63, 64, 65, 127, 128, 129)] == [1, 63, 64, 65, 127, 128, 129]
    assert [interpret.shrink(v, tiles) for v in (255, 256, 257, 1023, 1024, 1025, 2048)] == \
        [127, 128, 129, 127, 128, 129, 128]
    for odd in (203, 239, 300, 113 + 64):
        assert 64 < interpret.shrink(odd, tiles) <= 128
    assert interpret.shrink(40, (16,)) <= 33  # a smaller declared tile: smaller lengths


def test_fit_is_idempotent_and_keeps_head_dims_dtype_and_group_ratio():
    for cfg in (*regimes.AGREEMENT, *regimes.GQA, *regimes.WINDOW, *regimes.ROPE, *regimes.NORMS):
        once = interpret.fit(cfg, (64,))
        assert interpret.fit(once, (64,)) == once  # so a repro line replays the fitted config
        assert getattr(once, "dtype", None) == getattr(cfg, "dtype", None)
        for field in ("E", "Ev", "D"):
            assert getattr(once, field, None) == getattr(cfg, field, None)
        if hasattr(cfg, "hq"):
            assert once.hq <= interpret.MAX_HEADS and (once.hkv == 1) == (cfg.hkv == 1)  # MQA stays MQA
            assert cfg.hkv == 1 or once.hq * cfg.hkv == cfg.hq * once.hkv  # else the group ratio is kept


def test_a_target_without_triton_is_not_interpreted():
    target = load_target("reference")
    assert target.load_error is None and not target.info.interpreted


@pytest.mark.optional_libs("triton")
def test_triton_imported_by_something_else_does_not_make_a_target_interpreted(monkeypatch):
    """In one process (``--isolation none``, xdist workers) triton may already be imported by
    another target or a library: what counts is the target's own names (``uses_triton``)."""
    import triton  # noqa: F401  (imported first, as an earlier in-process target would)
    monkeypatch.setenv(interpret.ENV, "1")
    target = load_target("reference", isolation="none")
    assert target.load_error is None and not target.info.interpreted
    kernels = load_target("reference.triton.norms", isolation="none")
    assert kernels.load_error is None and kernels.info.interpreted


def test_missing_triton_is_one_line_naming_the_install_command(tmp_path):
    path = tmp_path / "my_kernels.py"
    path.write_text("raise ModuleNotFoundError(\"No module named 'triton'\", name='triton')\n")
    for isolation in ("none", "process"):
        target = load_target(str(path), isolation=isolation, timeout=30)
        try:
            assert target.load_error is not None and interpret.INSTALL in target.load_error
            assert len(target.load_error.splitlines()) == 1, target.load_error
        finally:
            target.close()


@pytest.mark.optional_libs("triton")
def test_a_triton_file_is_interpreted_on_cpu_with_a_longer_limit(tmp_path):
    path = tmp_path / "my_kernels.py"
    path.write_text("import triton\nHARNESS_TILES = (32,)\n")
    target = load_target(str(path), isolation="process", timeout=10)
    try:
        assert target.load_error is None and target.info.interpreted and target.info.tiles == (32,)
        assert target.worker.timeout == 10 * interpret.TIMEOUT_FACTOR
    finally:
        target.close()


SCALED = """
import torch, triton, triton.language as tl

@triton.jit
def _mul(X, Y, s, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(Y + i, tl.load(X + i) * s)

def scaled(x, s):
    y = torch.empty_like(x)
    _mul[(1,)](x, y, s, N=x.numel())
    return y
"""


@pytest.mark.optional_libs("triton")
def test_an_interpreted_kernel_gets_a_float_argument_as_fp32_as_compiled_code_does(tmp_path):
    """Compiled, a Python float argument is an fp32 scalar (``mangle_type``); the bare interpreter
    passes it unrounded, which hid a float64 kernel's rounded ``scale``/``eps`` from every CPU run
    (the first CUDA run failed them). A loaded target's interpreter rounds it as compiled code does."""
    import subprocess
    import sys
    path = tmp_path / "scaled.py"
    path.write_text(SCALED)
    probe = ("import sys, torch\n"
             "from harness.boundary.target_import import import_and_describe\n"
             "module, info = import_and_describe(sys.argv[1], 'force')\n"
             "x = torch.ones(16, dtype=torch.float64)\n"
             "print(info.interpreted, repr(float(module.scaled(x, 0.1)[0])))\n")
    out = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "TRITON_INTERPRET": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    interpreted, value = out.stdout.split()
    fp32 = float(torch.tensor(0.1, dtype=torch.float32))
    assert interpreted == "True" and float(value) == fp32 != 0.1, out.stdout


def test_fit_fits_each_call_of_a_history():
    """A history (``history.<name>``) holds its calls as JSON: each is fitted as a single call is,
    so an interpreted kernel's history property gets the same small lengths as its own family."""
    from harness.spec.configs import HistoryConfig
    calls = (*regimes.AGREEMENT[:3], *regimes.GQA[:1])
    history = HistoryConfig(name="scaled_dot_product_attention", calls=tuple(c.to_json() for c in calls))
    fitted = interpret.fit(history, (64,))
    assert fitted.configs() == [interpret.fit(c, (64,)) for c in calls]
    assert interpret.fit(fitted, (64,)) == fitted


def test_the_smoke_tier_checks_one_configuration_on_fewer_heads_with_the_same_lengths(monkeypatch):
    """CI's tier (``$HARNESS_INTERPRET_TIER=smoke``, ``tests/test_triton_suites.py``): one check
    per property, at most 4 query heads (as far as the group ratio and several KV heads are kept),
    the full tier's lengths (an online softmax needs a second full key block); what it fits the
    full tier keeps, so a repro line replays in either tier. ``$HARNESS_INTERPRET_CHECKS`` still
    overrides the checks."""
    monkeypatch.delenv(interpret.CHECKS_ENV, raising=False)
    monkeypatch.delenv(interpret.TIER_ENV, raising=False)
    full = {cfg: interpret.fit(cfg, (64,)) for cfg in (*regimes.AGREEMENT, *regimes.GQA, *regimes.GRAD_GQA)}
    assert interpret.tier() == "full" and interpret.budget() >= 8
    monkeypatch.setenv(interpret.TIER_ENV, "smoke")
    assert interpret.tier() == "smoke" and interpret.budget() == 1
    for cfg, wide in full.items():
        once = interpret.fit(cfg, (64,))
        assert (once.L, once.S, once.E, once.Ev, once.dtype) == (wide.L, wide.S, wide.E, wide.Ev, wide.dtype)
        assert once.hq <= interpret.SMOKE_MAX_HEADS or once.hkv == 2  # halving stops at 2 KV heads
        assert (once.hkv == 1) == (cfg.hkv == 1)  # MQA stays MQA, GQA stays GQA
        assert cfg.hkv == 1 or once.hq * cfg.hkv == cfg.hq * once.hkv
        assert interpret.fit(once, (64,)) == once
        monkeypatch.delenv(interpret.TIER_ENV)
        assert interpret.fit(once, (64,)) == once
        monkeypatch.setenv(interpret.TIER_ENV, "smoke")
    assert interpret.fit(regimes.GQA[0], (64,)).hkv > 1  # several KV heads stay several: (8, 4) -> (4, 2)
    monkeypatch.setenv(interpret.CHECKS_ENV, "3")
    assert interpret.budget() == 3
    monkeypatch.setenv(interpret.TIER_ENV, "quick")
    with pytest.raises(ValueError, match="full, smoke"):
        interpret.tier()


def test_state_machines_and_gradcheck_follow_the_tier(monkeypatch):
    """A state machine checks its sequences itself: an interpreted target runs ``budget()`` of them;
    gradcheck runs in its fast mode for an interpreted target in the smoke tier only."""
    from types import SimpleNamespace
    interpreted, compiled = (SimpleNamespace(info=SimpleNamespace(interpreted=v)) for v in (True, False))
    monkeypatch.delenv(interpret.CHECKS_ENV, raising=False)
    monkeypatch.setenv(interpret.TIER_ENV, "smoke")
    assert interpret.machine_examples(interpreted) == {"max_examples": 1}
    assert interpret.machine_examples(compiled) == {}
    assert interpret.gradcheck_fast(interpreted) and not interpret.gradcheck_fast(compiled)
    monkeypatch.delenv(interpret.TIER_ENV)
    assert interpret.machine_examples(interpreted) == {"max_examples": interpret.budget()}
    assert not interpret.gradcheck_fast(interpreted)


@pytest.mark.optional_libs("triton")
def test_compiled_triton_gets_a_first_call_compile_allowance(monkeypatch, tmp_path):
    """On a GPU each new configuration of a Triton kernel is JIT-compiled on its first call: the
    first H200 run saw first calls past the 20 s limit. A compiled Triton target gets
    JIT_TIMEOUT_FACTOR x the limit, an interpreted one TIMEOUT_FACTOR x, anything else 1 x."""
    from harness.boundary.target_import import TargetInfo
    import triton  # noqa: F401  (a target's import brings it in)
    path = tmp_path / "kernels.py"
    path.write_text("import triton\n")
    from harness.boundary.target_import import import_spec
    module = import_spec(str(path))
    monkeypatch.delenv(interpret.ENV, raising=False)
    assert interpret.jit_compiled(module)
    monkeypatch.setenv(interpret.ENV, "1")
    assert not interpret.jit_compiled(module)
    assert not interpret.jit_compiled(interpret)  # no triton in it
    assert interpret.limit_factor(TargetInfo(file="k.py", jit=True)) == interpret.JIT_TIMEOUT_FACTOR > 1
    assert interpret.limit_factor(TargetInfo(file="k.py", interpreted=True)) == interpret.TIMEOUT_FACTOR
    assert interpret.limit_factor(TargetInfo(file="k.py")) == 1.0
