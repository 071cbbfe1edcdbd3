"""Triton kernels under Triton's interpreter: each planted Triton bug is caught on a CPU by the
property named, in both tiers of the interpreter profile (``harness.boundary.interpret``). In CI, the smoke
tier, on which CI also runs the correct kernels (``reference/triton/``) through every applicable
suite (``tests/test_triton_suites.py``): so each catching property passes the correct kernel on the
configuration that catches the bug. Opt-in (``$HARNESS_TRITON_SUITES=1``, ``triton_tiers``): the
full tier a user's ``pytest suites --impl file.py`` gets, for the bugs and for the correct kernels
on the catching properties (``CONTROLS``, ~2.5 min of CPU), and the liger adapter's agreement.

Every target in ``tests/planted/triton/`` is a reference Triton kernel with one edit
(``_mutant.py``: the edit is the planted file's one-line diff), run as a user's Triton file is:
``--impl file.py`` on a CPU device, no flag, so the harness's worker sets ``TRITON_INTERPRET=1``
before the import. Each case runs ONE suite test in-process (``-k``) under the derandomized ci
profile. Without triton installed these skip with the install command, except under
``$HARNESS_REQUIRE_TRITON`` or ``$HARNESS_REQUIRE_OPTIONAL`` (CI installs it: a check it skips proves
nothing); the liger tests need liger-kernel as well (``optional_libs``, tests/conftest.py).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import planted_index
from planted_support import assert_caught, run_suite
from triton_tiers import TIERS, full_tier_only, use_tier

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "triton"

pytestmark = pytest.mark.optional_libs("triton")
NEEDS_LIGER = pytest.mark.optional_libs("liger_kernel")

#: the planted kernels, each described by its own docstring (``Caught by:``, ``Message:``: tests/planted_index.py)
BUGS = planted_index.planted("triton")


#: the smoke tier in CI; the full tier (what ``pytest suites --impl file.py`` runs) opt-in: ~30 s more
ALL_TIERS = [TIERS[0], pytest.param(TIERS[1], marks=full_tier_only("~30 s of CPU more"))]


@pytest.mark.parametrize("tier", ALL_TIERS)
@pytest.mark.parametrize("bug", BUGS, ids=[b.path.name for b in BUGS])
def test_planted_triton_bug_caught(pytester, monkeypatch, bug, tier):
    use_tier(monkeypatch, tier)
    out = assert_caught(pytester, bug.suite, bug.path, bug.test, bug.messages)
    assert "interpreted (TRITON_INTERPRET=1)" in out, "the header does not say the target is interpreted"


def test_a_correct_kernel_that_sums_in_bfloat16_passes_on_a_cpu(pytester, monkeypatch):
    """Issue 42: triton 3.9's interpreter summed bfloat16 as the integers of its bit patterns, so a
    correct RMSNorm whose tl.sum reduces in bfloat16 failed on a CPU. Under the harness's
    interpreter fixes it adds in bfloat16, each sum rounded, as compiled code does: it passes."""
    use_tier(monkeypatch, "smoke")
    result = run_suite(pytester, ["test_rmsnorm.py"], [PLANTED / "rms_bf16_stats_correct.py"],
                       "test_large_values or test_eps or test_weight or test_no_mean_subtraction")
    out = result.stdout.str()
    assert "Triton's interpreter (fixes: bfloat16, libdevice, autotune): every probed operation right" in out
    result.assert_outcomes(passed=4)


def test_without_the_fixes_bfloat16_is_unsupported_never_failed(pytester, monkeypatch):
    """The bare interpreter (``$HARNESS_INTERPRETER_FIXES=off``): its probe finds bfloat16 wrong,
    so both bfloat16 kernels, the correct one and the one with a bfloat16-only bug, are reported
    ``unsupported (interpreter: tl.sum, ... wrong in bfloat16 under triton X.Y)``, neither failed
    nor passed: the CPU says nothing about their bfloat16, the GPU run (notes/GPU_RUN.md) does. A
    fresh pytest: a target's worker sees the environment its server started with."""
    from planted_support import suite_file
    monkeypatch.setenv("HARNESS_INTERPRETER_FIXES", "off")
    use_tier(monkeypatch, "smoke")
    result = pytester.runpytest_subprocess(
        str(suite_file("test_rmsnorm.py")), "--impl", str(PLANTED / "rms_bf16_stats_correct.py"),
        "--impl", str(PLANTED / "rms_bf16_read_as_fp16.py"), "-k", "test_large_values", "-p", "no:cacheprovider",
        "--hypothesis-profile", "harness-ci", "-rs")
    out = result.stdout.str()
    result.assert_outcomes(skipped=2)
    assert out.count("unsupported (interpreter: tl.sum, tl.dot, arithmetic and ") >= 2, out[-3000:]
    assert "Triton's interpreter (fixes: none): " in out and "bfloat16 unsupported (interpreter: tl.sum" in out


#: the correct kernels pass every property that catches a planted bug on the full tier (in CI the
#: smoke tier runs them through every applicable property: tests/test_triton_suites.py)
CONTROLS = [
    ("reference.triton.flash_attention", ["test_attention.py", "test_attention_masks.py"],
     "test_agreement or test_causal or test_gqa"),
    ("reference.triton.flash_attention", ["test_attention_grad.py"], "test_agreement"),
    ("reference.triton.norms", ["test_norm_grad.py"], "test_rmsnorm"),
    ("reference.triton.kvcache", ["test_kvcache.py"], "test_unfilled_slots"),
]


@full_tier_only("~2.5 min of CPU on the 2-core machine (the attention part ~2 min)")
@pytest.mark.parametrize("module,suites,k", CONTROLS, ids=[f"{c[0]}-{c[1][0]}" for c in CONTROLS])
def test_correct_triton_kernel_passes(pytester, monkeypatch, module, suites, k):
    use_tier(monkeypatch, "full")
    result = run_suite(pytester, suites, [module], k)
    out = result.stdout.str()
    assert "interpreted (TRITON_INTERPRET=1)" in out
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("passed", 0) >= 1, out[-3000:]


@full_tier_only("~80 s of CPU (CI runs liger's kernel through every suite in Hugging Face's layout: "
                "tests/test_triton_suites.py)")
@NEEDS_LIGER
def test_liger_rope_adapter_passes_under_the_interpreter(pytester, monkeypatch):
    """liger-kernel 0.8.5's Triton RoPE (``harness.adapters.liger_positions``) runs interpreted
    and passes the RoPE agreement and its backward on the ci profile's draws, with its convention
    named (its L = 1 bug: the next test)."""
    use_tier(monkeypatch, "full")
    result = run_suite(pytester, ["test_rope.py", "test_position_grad.py"], ["harness.adapters.liger_positions"],
                       "test_agreement or test_rope_dx")
    out = result.stdout.str()
    assert "interpreted (TRITON_INTERPRET=1)" in out
    result.assert_outcomes(passed=2)


@NEEDS_LIGER
def test_liger_rope_decode_step_bug_is_caught(capsys):
    """A real bug of liger-kernel 0.8.5, found by the false-alarm sweep (so liger is a known-buggy
    release in ``harness.controls``, not a control): on a contiguous (B, H, 1, D) q, batch items
    past the first are rotated wrong (the kernel's row stride is read from a size-1 dim's view:
    the next test). The sweep's shrunk configuration, replayed: rope.agreement names it."""
    from harness.cli import main as cli
    config = ('{"type":"RopeConfig","batch":2,"heads":2,"L":1,"D":4,"dtype":"float32","base":10000.0,'
              '"offset":7,"spread":0,"per_batch":false,"shift":0,"seed":1}')
    code = cli(["repro", "suites/positions/test_rope.py::check_agreement", "--impl",
                "harness.adapters.liger_positions", "--config", config])
    out = capsys.readouterr().out
    assert code == 1 and "[rope.agreement] property violated" in out and "at index (1," in out, out[-2000:]
    # the same kernel given q in the layout it assumes (Hugging Face's) passes the same configuration
    code = cli(["repro", "suites/positions/test_rope.py::check_agreement", "--impl",
                "harness.adapters.liger_positions_hf_layout", "--config", config])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]


#: liger-kernel 0.8.5's rope_forward, called directly on the two physical layouts of a (B, H, 1, D) q
LIGER_LAYOUTS = r"""
import json, torch
from liger_kernel.ops.rope import LigerRopeFunction
B, H, D = 2, 2, 4
theta = 10000.0 ** (-2 * torch.arange(D // 2, dtype=torch.float64) / D)
angles = torch.cat([7 * theta, 7 * theta])[None, None]          # position 7, each frequency twice
cos, sin = angles.cos().float(), angles.sin().float()            # (1, 1, D)
def want(q):
    half = torch.cat([-q[..., D // 2:], q[..., :D // 2]], -1)
    return q * cos[:, None] + half * sin[:, None]
torch.manual_seed(0)
x = torch.randn(B, H, 1, D)
hf = torch.empty(B, 1, H, D).copy_(x.transpose(1, 2)).transpose(1, 2)  # HF: a view of (B, L, H, D)
out = {}
for name, q in (("contiguous", x.clone()), ("hf_view", hf)):
    got, _ = LigerRopeFunction.apply(q.clone() if name == "contiguous" else q, x[:, :1].clone(), cos, sin)
    out[name] = {"row_stride": q.transpose(1, 2).stride(1),
                 "error": [float((got[b] - want(x)[b]).abs().max()) for b in range(B)]}
print(json.dumps(out))
"""


@NEEDS_LIGER
def test_liger_rope_decode_bug_is_the_row_stride_of_a_size_1_dim():
    """The cause, pinned in liger 0.8.5's source (``liger_kernel/ops/rope.py``; 0.8.5 is the newest
    release on PyPI, 2026-12-03): ``rope_forward`` takes ``q.transpose(1, 2)`` (B, L, H, D), calls
    ``.contiguous()`` and launches one program per row ``pid = b * L + l`` at ``pid * q.stride(1)``,
    which holds only when ``stride(0) == L * stride(1)``. For a contiguous (B, H, 1, D) q the
    transposed view's size-1 dim keeps the L dim's stride D, PyTorch counts the view contiguous
    (a size-1 dim's stride is not looked at), so nothing is copied, and program b starts D elements
    on, not H * D: batch item 0's later heads are rotated twice, and the later batch items read the
    wrong heads. Hugging Face's decode step passes q as a view of its (B, 1, H, D) projection,
    whose row stride is H * D: that call is right. The backward (``rope_backward``) indexes the
    same way. Not the interpreter's doing: the stride is computed on the host before the launch."""
    import json
    import subprocess
    import sys
    env = dict(os.environ, TRITON_INTERPRET="1")  # before liger's @triton.jit kernels are defined
    proc = subprocess.run([sys.executable, "-c", LIGER_LAYOUTS], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    H, D = 2, 4
    assert got["contiguous"]["row_stride"] == D and got["hf_view"]["row_stride"] == H * D
    assert all(e > 0.1 for e in got["contiguous"]["error"]), got  # both batch items wrong
    assert all(e < 1e-6 for e in got["hf_view"]["error"]), got
