"""Triton's interpreter where it computes wrong (issue 42): the exact fixes the harness puts into it
(``harness.boundary.interpreter_fixes``) and the probe that decides which dtypes an interpreted target can
be checked in (``harness.boundary.interpreter_probe``).

The kernels run in a subprocess that imports triton with ``TRITON_INTERPRET=1`` (as an interpreted
target's worker does: in a process that imported triton without it, ``tl.sum`` is compiled code),
once with the fixes and once without (``interpreted``, module-scoped: two ~5 s runs). The rest
needs no triton: the bit-exact conversions against an independent exact reference, the cache, the
reasons, and the verdict's path through a target's configurations.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.boundary import interpret, interpreter_fixes, interpreter_probe
from harness.boundary.interpreter_fixes import bf16_to_f32, f32_to_bf16, f64_to_bf16

ROOT = Path(__file__).resolve().parents[1]
NEEDS_TRITON = pytest.mark.optional_libs("triton")


# -- the conversions, against exact rational arithmetic --------------------------------------------

def nearest_bf16(value: float) -> float:
    """The bfloat16 nearest ``value`` (a float64), ties to even, from exact fractions: 8 significant
    bits, exponents down to -126 then subnormal steps of 2**-133, past the largest finite one inf."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return value
    q = abs(Fraction(value))
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    step = Fraction(2) ** (max(e, -126) - 7)
    n, rest = divmod(q, step)
    n = int(n) + (rest > step / 2 or (rest == step / 2 and int(n) % 2 == 1))
    result = n * step
    if result >= Fraction(2) ** 128:
        return math.copysign(math.inf, value)
    return math.copysign(float(result), value)


def _bits_equal(got: np.ndarray, want: list[float]) -> bool:
    return np.array_equal(got.view(np.uint16), torch.tensor(want, dtype=torch.bfloat16).view(torch.int16).numpy().view(np.uint16))


def test_bfloat16_rounding_from_float32_is_torchs_round_to_nearest_even():
    g = torch.Generator().manual_seed(0)
    values = torch.cat([torch.randn(20000, generator=g) * 10 ** torch.randint(-40, 38, (20000,), generator=g).float(),
                        torch.tensor([1 + 2 ** -8, 1 + 3 * 2 ** -8, 2 - 2 ** -9, -(1 + 3 * 2 ** -8), 3.3895e38,
                                      3.4028e38, float("inf"), -float("inf"), 0.0, -0.0, 1e-40, -1e-45])])
    values = values.float()
    got = f32_to_bf16(values.numpy())
    want = values.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(got, want)
    assert np.isnan(bf16_to_f32(f32_to_bf16(np.array([np.nan], np.float32)))).all()
    assert np.array_equal(bf16_to_f32(want), values.to(torch.bfloat16).float().numpy())  # decoding is exact


def test_bfloat16_from_float64_rounds_once_as_cvt_rn_does():
    """Through float32 a double can round twice: 1 + 2**-8 + 2**-40 is just above a bfloat16 tie,
    float32 drops the 2**-40 and leaves the tie, which then goes to even (1.0); rounded once it is
    1 + 2**-7 (torch's float64 -> bfloat16 goes through float32)."""
    tricky = [1 + 2 ** -8 + 2 ** -40, 1 + 2 ** -8 - 2 ** -40, -(1 + 2 ** -8 + 2 ** -45), 3 * 2 ** -135 + 2 ** -160,
              3.3961e38, 1e300, -1e-300, 0.1, 1 / 3]
    g = np.random.default_rng(1)
    values = np.concatenate([np.array(tricky), g.standard_normal(5000) * 10.0 ** g.integers(-45, 39, 5000)])
    got = bf16_to_f32(f64_to_bf16(values)).astype(np.float64)
    want = np.array([nearest_bf16(float(v)) for v in values])
    assert np.array_equal(got, want), values[got != want][:5]
    assert got[0] == 1 + 2 ** -7 and float(torch.tensor(tricky[0], dtype=torch.float64).to(torch.bfloat16)) == 1.0


# -- the probe's verdict, the reasons, the cache (no triton: the probe's answer stands in) ---------

def _answer(wrong: dict[str, list[str]]) -> dict:
    return {d: {op: ("got 5.9e-39, want 10" if op in wrong.get(d, ()) else None) for op in interpreter_probe.OPS}
            for d in interpreter_probe.DTYPES}


def test_a_wrong_operation_makes_its_dtype_unsupported_with_the_op_and_triton_named(monkeypatch):
    monkeypatch.setattr(interpreter_fixes, "triton_version", lambda: "3.9.0")
    monkeypatch.setattr(interpreter_probe, "triton_version", lambda: "3.9.0")
    verdict = interpreter_probe.unsupported_dtypes(_answer({"bfloat16": ["tl.sum"]}))
    assert verdict == {"bfloat16": "interpreter: tl.sum wrong in bfloat16 under triton 3.9"}
    many = interpreter_probe.unsupported_dtypes(_answer({"float16": list(interpreter_probe.OPS[:5])}))
    assert many["float16"] == "interpreter: tl.sum, tl.dot, arithmetic and 2 more wrong in float16 under triton 3.9"
    assert interpreter_probe.unsupported_dtypes(_answer({})) == {}


def test_the_probe_runs_once_per_triton_version_and_is_cached_as_json(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs = []
    monkeypatch.setattr(interpreter_probe, "probe", lambda: runs.append(1) or _answer({"bfloat16": ["tl.sum"]}))
    first = interpreter_probe.check_interpreter(("bfloat16",))
    again = interpreter_probe.check_interpreter(("bfloat16",))
    assert first == again and list(first) == ["bfloat16"] and len(runs) == 1
    path = tmp_path / "harness" / interpreter_probe.CACHE_FILE
    entries = json.loads(path.read_text())["entries"]  # JSON, never a pickle
    assert len(entries) == 1 and interpreter_fixes.triton_version() in next(iter(entries))
    interpreter_probe.check_interpreter(())  # fixes off: another entry, another run
    assert len(runs) == 2 and len(json.loads(path.read_text())["entries"]) == 2
    monkeypatch.setattr(interpreter_probe, "triton_version", lambda: "9.9.9")  # another triton: run again
    interpreter_probe.check_interpreter(("bfloat16",))
    assert len(runs) == 3


def test_a_broken_or_unwritable_cache_is_passed_over(monkeypatch, tmp_path):
    monkeypatch.setattr(interpreter_probe, "probe", lambda: _answer({}))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / interpreter_probe.CACHE_FILE).write_text("{not json")
    assert interpreter_probe.check_interpreter(()) == {}
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # its 'harness' folder cannot be made
    assert interpreter_probe.check_interpreter(()) == {}


def test_a_probe_that_cannot_run_vouches_for_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def broken():
        raise RuntimeError("triton was imported without TRITON_INTERPRET=1")

    monkeypatch.setattr(interpreter_probe, "probe", broken)
    verdict = interpreter_probe.check_interpreter(())
    assert set(verdict) == set(interpreter_probe.DTYPES)
    assert all(v.startswith("interpreter: the probe could not run (RuntimeError: triton was imported") for v in verdict.values())
    assert not (tmp_path / "harness" / interpreter_probe.CACHE_FILE).exists()  # a failure is not cached


def test_the_fixes_can_be_turned_off(monkeypatch):
    monkeypatch.setenv(interpreter_fixes.ENV, "off")
    assert interpreter_fixes.apply() == ()


def test_an_interpreter_gap_is_unsupported_and_anything_else_is_not():
    from harness.boundary.guard import ImplementationError
    from harness.boundary.isolation import TargetRaised

    def failure(cause):
        exc = ImplementationError("the target raised")
        exc.__cause__ = cause
        return exc

    gap = failure(TargetRaised("InterpreterError", "NotImplementedError(\"interpreter: libdevice's __nv_j0f is not "
                                                   "implemented under the interpreter (...)\")"))
    reason = interpret.interpreter_gap(gap)
    assert reason.startswith("interpreter: libdevice's __nv_j0f is not implemented") and " under triton " in reason
    asm = failure(TargetRaised("InterpreterError", "NotImplementedError('inline_asm not supported in interpreter mode')"))
    assert interpret.interpreter_gap(asm).startswith("interpreter: inline_asm not supported in interpreter mode")
    assert interpret.interpreter_gap(failure(TargetRaised("InterpreterError", "IndexError('out of range')"))) is None
    assert interpret.interpreter_gap(failure(TargetRaised("ValueError", "NotImplementedError('x')"))) is None


# -- the interpreter itself, in a subprocess that imports triton interpreted ------------------------

SCRIPT = r'''
import json, os, sys
import numpy as np
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.language.extra.libdevice import rsqrt as rsqrt_by_name
from triton.language.extra.cuda import libdevice as cuda_libdevice
from harness import interpret, interpreter_fixes, interpreter_probe
from harness.boundary.guard import ImplementationError

FIXES = interpreter_fixes.apply() if os.environ.get("FIXES") == "on" else ()


@triton.jit
def elementwise(X, Y, Z, F, D, O, OB, N: tl.constexpr):
    i = tl.arange(0, N)
    x, y, z = tl.load(X + i), tl.load(Y + i), tl.load(Z + i)
    dtype = O.dtype.element_ty
    tl.store(O + i, x + y)
    tl.store(O + N + i, x - y)
    tl.store(O + 2 * N + i, x * y)
    tl.store(O + 3 * N + i, -x)
    tl.store(O + 4 * N + i, tl.maximum(x, y))
    tl.store(O + 5 * N + i, tl.fma(x, y, z))
    tl.store(O + 6 * N + i, tl.load(F + i).to(dtype))
    tl.store(O + 7 * N + i, tl.load(D + i).to(dtype))
    tl.store(O + 8 * N + i, (x.to(tl.float32) / y.to(tl.float32)).to(dtype))
    tl.store(O + 9 * N + i, tl.exp(x.to(tl.float32) * 0.01).to(dtype))
    tl.store(OB + i, (x > y).to(tl.int8))


@triton.jit
def rows(X, S, C, M, A, R: tl.constexpr, K: tl.constexpr):
    r = tl.arange(0, R)
    k = tl.arange(0, K)
    at = r[:, None] * K + k[None, :]
    x = tl.load(X + at)
    tl.store(S + r, tl.sum(x, axis=1))
    tl.store(C + at, tl.cumsum(x, axis=1))
    tl.store(M + r, tl.max(x, axis=1))
    tl.store(A + r, tl.argmax(x, axis=1))


@triton.jit
def dot(A, B, O, M: tl.constexpr):
    i = tl.arange(0, M)
    at = i[:, None] * M + i[None, :]
    tl.store(O + at, tl.dot(tl.load(A + at), tl.load(B + at)))


@triton.jit
def libdevice_forms(X, O, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(X + i)
    tl.store(O + i, libdevice.rsqrt(x))
    tl.store(O + N + i, rsqrt_by_name(x))
    tl.store(O + 2 * N + i, cuda_libdevice.rsqrt(x))
    tl.store(O + 3 * N + i, libdevice.pow(x, 2.0))
    tl.store(O + 4 * N + i, libdevice.tanh(x))


@triton.jit
def unlisted(X, O, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, libdevice.j0(tl.load(X + i)))


@triton.jit
def brief(X, O):
    x = tl.load(X + tl.arange(0, 4))
    tl.store(O, tl.sum(x, axis=0))
    tl.store(O + 1, tl.sum(x * x, axis=0))
    tl.store(O + 2, tl.max(x, axis=0))
    tl.store(O + 3, tl.sum(x.to(tl.float32), axis=0))


def bits(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes().hex()


out = {"fixes": list(FIXES), "dtypes": {}}
g = torch.Generator().manual_seed(0)
N = 1024
for name in ("float32", "float16", "bfloat16", "float64"):
    d = getattr(torch, name)
    scale = 10.0 ** torch.randint(-3, 4, (N,), generator=g).double()
    x, y, z = ((torch.randn(N, generator=g, dtype=torch.float64) * scale).to(d) for _ in range(3))
    f = (torch.randn(N, generator=g) * 100).float()
    dd = torch.randn(N, generator=g, dtype=torch.float64) * 100
    o = torch.zeros(10 * N, dtype=d)
    ob = torch.zeros(N, dtype=torch.int8)
    elementwise[(1,)](x, y, z, f, dd, o, ob, N)
    R, K = 8, 64
    m = (torch.randn(R, K, generator=g, dtype=torch.float64) * 4).to(d)
    s, c, mx = torch.zeros(R, dtype=d), torch.zeros(R, K, dtype=d), torch.zeros(R, dtype=d)
    am = torch.zeros(R, dtype=torch.int32)
    rows[(1,)](m, s, c, mx, am, R, K)
    a, b = ((torch.randn(32, 32, generator=g, dtype=torch.float64)).to(d) for _ in range(2))
    od = torch.zeros(32, 32, dtype=torch.float64 if name == "float64" else torch.float32)
    dot[(1,)](a, b, od, 32)
    entry = {"elementwise": bits(o), "compare": bits(ob), "sum": bits(s), "cumsum": bits(c), "max": bits(mx),
             "argmax": am.tolist(), "dot": bits(od)}
    if name == "bfloat16":
        xd, yd, zd = x.double(), y.double(), z.double()
        nearest = lambda v: torch.tensor(v, dtype=torch.float64)
        want = torch.cat([(x + y).double(), (x - y).double(), (x * y).double(), (-x).double(),
                          torch.maximum(x, y).double()])
        entry["elementwise_exact"] = bool(torch.equal(o[:5 * N].double(), want))
        entry["fma_inputs"] = [xd.tolist(), yd.tolist(), zd.tolist()]
        entry["fma"] = o[5 * N:6 * N].double().tolist()
        entry["from_f32_exact"] = bool(torch.equal(o[6 * N:7 * N], f.to(d)))
        entry["from_f64"] = [dd.tolist(), o[7 * N:8 * N].double().tolist()]
        entry["div_exact"] = bool(torch.equal(o[8 * N:9 * N], (x.float() / y.float()).to(d)))
        entry["compare_exact"] = bool(torch.equal(ob, (x > y).to(torch.int8)))
        tree = m.clone()
        while tree.shape[1] > 1:  # a pairwise tree, each addition rounded to bfloat16 (torch adds in it)
            h = tree.shape[1] // 2
            tree = tree[:, :h] + tree[:, h:]
        entry["sum_is_bf16_tree"] = bool(torch.equal(s, tree[:, 0]))
        entry["sum_error_vs_f32"] = float((s.double() - m.double().sum(1)).abs().max())
        run = m[:, :1].clone()
        steps = [run]
        for k in range(1, K):
            run = run + m[:, k:k + 1]
            steps.append(run)
        entry["cumsum_is_sequential_bf16"] = bool(torch.equal(c, torch.cat(steps, 1)))
        entry["max_exact"] = bool(torch.equal(mx, m.max(1).values))
        entry["argmax_exact"] = am.tolist() == m.float().argmax(1).int().tolist()
        exact_dot = a.double() @ b.double()
        entry["dot_error"] = float(((od.double() - exact_dot).abs() / (a.double().abs() @ b.double().abs())).max())
    out["dtypes"][name] = entry

x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.bfloat16)
o = torch.zeros(4, dtype=torch.bfloat16)
brief[(1,)](x, o)
out["brief"] = o.double().tolist()

v = torch.tensor([0.25, 1.0, 4.0, 9.0, 2.0, 0.5, 16.0, 100.0])
o = torch.zeros(5 * 8)
try:
    libdevice_forms[(1,)](v, o, 8)
    out["libdevice"] = o.tolist()
except Exception as exc:
    out["libdevice"] = f"{type(exc).__name__}: {exc}"[:300]
try:
    unlisted[(1,)](v, torch.zeros(8), 8)
    out["unlisted"] = None
except Exception as exc:
    failure = ImplementationError("raised")
    failure.__cause__ = exc
    out["unlisted"] = interpret.interpreter_gap(failure)
out["probe"] = {d: interpreter_probe.wrong_ops(r, d) for r in [interpreter_probe.probe()] for d in r}
print("RESULT " + json.dumps(out))
'''


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """fixes ("on", "off") -> what the script found, each in a fresh interpreted process."""
    folder = tmp_path_factory.mktemp("interpreter")
    script = folder / "interpreter_script.py"
    script.write_text(SCRIPT)
    answers = {}
    for fixes in ("on", "off"):
        env = {**os.environ, "TRITON_INTERPRET": "1", "FIXES": fixes, "XDG_CACHE_HOME": str(folder),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
        line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        assert done.returncode == 0 and line, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        answers[fixes] = json.loads(line[0].removeprefix("RESULT "))
    return answers


@NEEDS_TRITON
def test_the_briefs_bfloat16_sum_is_garbage_bare_and_right_fixed(interpreted):
    """The issue's numbers: tl.sum of bfloat16 [1, 2, 3, 4] and of its squares; tl.max and a sum
    after .to(tl.float32) were right even bare."""
    bare, fixed = interpreted["off"]["brief"], interpreted["on"]["brief"]
    assert abs(bare[0] - 5.9e-39) < 1e-40 and bare[1] != 30 and bare[2:] == [4.0, 10.0]
    assert fixed == [10.0, 30.0, 4.0, 10.0]
    assert interpreted["on"]["fixes"] == ["bfloat16", "libdevice", "autotune"] and interpreted["off"]["fixes"] == []


@NEEDS_TRITON
def test_the_probe_finds_what_is_wrong_bare_and_nothing_fixed(interpreted):
    bare, fixed = interpreted["off"]["probe"], interpreted["on"]["probe"]
    assert fixed == {d: [] for d in interpreter_probe.DTYPES}
    assert {"tl.sum", "tl.dot", "arithmetic", "cast", "tl.cumsum", "comparison/tl.where", "tl.fma"} <= set(bare["bfloat16"])
    for dtype in ("float32", "float16", "float64"):  # libdevice's stubs return None in every dtype
        assert bare[dtype] == ["libdevice.exp", "libdevice.sqrt", "libdevice.rsqrt"]


@NEEDS_TRITON
def test_the_fixes_change_nothing_in_float16_float32_float64(interpreted):
    """Bit for bit: elementwise math, casts, comparisons, tl.sum, tl.cumsum, tl.max, tl.argmax,
    tl.dot and tl.exp computed with and without the fixes."""
    for dtype in ("float32", "float16", "float64"):
        assert interpreted["on"]["dtypes"][dtype] == interpreted["off"]["dtypes"][dtype], dtype


@NEEDS_TRITON
def test_fixed_bfloat16_elementwise_math_is_the_correctly_rounded_result(interpreted):
    """What the GPU's bfloat16 instructions give: +, -, *, negation, max and comparisons equal
    torch's bfloat16 ops (computed wide, rounded once to nearest even); casts from float32 equal
    torch's; from float64 and tl.fma round once (exact fractions); float32 division cast back."""
    bf16 = interpreted["on"]["dtypes"]["bfloat16"]
    assert bf16["elementwise_exact"] and bf16["compare_exact"] and bf16["from_f32_exact"] and bf16["div_exact"]
    doubles, got = bf16["from_f64"]
    assert got == [nearest_bf16(v) for v in doubles]
    x, y, z = bf16["fma_inputs"]
    exact = [nearest_bf16(float(Fraction(a) * Fraction(b) + Fraction(c))) for a, b, c in zip(x, y, z)]
    assert bf16["fma"] == exact


@NEEDS_TRITON
def test_fixed_bfloat16_reductions_add_in_bfloat16_as_compiled_code_does(interpreted):
    """tl.sum: a pairwise tree of bfloat16 additions, each rounded (compiled Triton keeps a float
    sum in its dtype); tl.cumsum: in sequence, each step rounded; tl.max and tl.argmax exact;
    tl.dot: exact products accumulated in float32."""
    bf16 = interpreted["on"]["dtypes"]["bfloat16"]
    assert bf16["sum_is_bf16_tree"] and bf16["cumsum_is_sequential_bf16"]
    assert 0 < bf16["sum_error_vs_f32"] < 1.0  # it rounds (64 terms of size ~4: a bfloat16 ulp is 2**-5 at 4)
    assert bf16["max_exact"] and bf16["argmax_exact"]
    assert bf16["dot_error"] < 32 * 2 ** -23


@NEEDS_TRITON
def test_libdevice_runs_under_the_interpreter_in_each_form_and_an_unlisted_function_is_a_gap(interpreted):
    v = np.array([0.25, 1.0, 4.0, 9.0, 2.0, 0.5, 16.0, 100.0], dtype=np.float32)
    got = np.array(interpreted["on"]["libdevice"], dtype=np.float32).reshape(5, 8)
    rsqrt = 1 / np.sqrt(v)
    assert np.allclose(got[:3], rsqrt, rtol=2e-7)  # the stub module, a name imported from it, NVIDIA's module
    assert np.allclose(got[3], v * v) and np.allclose(got[4], np.tanh(v), rtol=1e-6)
    assert "NoneType" in interpreted["off"]["libdevice"]  # bare: libdevice.rsqrt(x) is None
    gap = interpreted["on"]["unlisted"]
    assert gap.startswith("interpreter: libdevice's __nv_j0f is not implemented") and "under triton" in gap


LOAD = r'''
import json
from harness import interpret
from harness.boundary.loader import load_target
from harness.suites.norms.configs import NormConfig
cfg = NormConfig(lead=(2,), normalized_shape=(8,), dtype="bfloat16", eps=1e-5, affine=False, log2_scale=0, seed=0)
target = load_target("reference.triton.norms", isolation="process", timeout=60)
try:
    print("RESULT " + json.dumps({"error": target.load_error, "interpreted": target.info.interpreted,
                                  "fixes": list(target.info.interpreter_fixes),
                                  "unsupported": target.info.interpreter_unsupported,
                                  "line": interpret.interpreter_line(target.info), "out": target.declared_out(cfg)}))
finally:
    target.close()
'''


def fresh(code: str, **env) -> dict:
    """``code``'s RESULT line, run in a fresh Python (a target's worker forks from a server started
    once per process, with the environment of that moment: a variable set later never reaches it)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert done.returncode == 0 and line, f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return json.loads(line[0].removeprefix("RESULT "))


@NEEDS_TRITON
def test_an_interpreted_target_gets_the_verdict_and_the_header_names_it(tmp_path):
    """Bare interpreter: the worker's probe makes bfloat16 (and, for libdevice, every dtype)
    unsupported, the header's interpreter line says why, and a bfloat16 configuration is ruled out
    with the reason; fixed, nothing is."""
    bare = fresh(LOAD, XDG_CACHE_HOME=str(tmp_path), HARNESS_INTERPRETER_FIXES="off")
    assert bare["error"] is None and bare["interpreted"] and bare["fixes"] == []
    assert set(bare["unsupported"]) == set(interpreter_probe.DTYPES)
    assert bare["out"].startswith("interpreter: tl.sum, tl.dot, arithmetic and ") and " wrong in bfloat16 under triton " in bare["out"]
    assert bare["line"].startswith("Triton's interpreter (fixes: none): float32 unsupported (interpreter: libdevice.exp")
    assert "bfloat16 unsupported (interpreter: tl.sum, tl.dot" in bare["line"]
    fixed = fresh(LOAD, XDG_CACHE_HOME=str(tmp_path))
    assert fixed["unsupported"] == {} and fixed["out"] is None and fixed["fixes"] == ["bfloat16", "libdevice", "autotune"]
    assert fixed["line"] == "Triton's interpreter (fixes: bfloat16, libdevice, autotune): every probed operation right"
    entries = json.loads((tmp_path / "harness" / interpreter_probe.CACHE_FILE).read_text())["entries"]
    assert len(entries) == 2  # one per state of the fixes, for this triton


@NEEDS_TRITON
def test_a_dtype_the_interpreter_gets_wrong_is_counted_unsupported_in_the_cell(monkeypatch, pytester, tmp_path):
    """One dtype wrong (bfloat16, as triton 3.9's bare interpreter has it), the others right: a
    property that draws both checks float16 and names the bfloat16 configurations it passed over
    in the cell's note; never a failure. The verdict is planted in the probe's cache, which the
    target's worker reads (the interpreter there is the fixed one: only the verdict differs); a
    fresh pytest, whose workers see the cache folder set here."""
    from planted_support import suite_file
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.delenv(interpreter_fixes.ENV, raising=False)
    key = interpreter_probe.cache_key(interpreter_fixes.FIXES)
    (cache / "harness").mkdir(parents=True)
    (cache / "harness" / interpreter_probe.CACHE_FILE).write_text(
        json.dumps({"schema": 1, "entries": {key: _answer({"bfloat16": ["tl.sum"]})}}))
    report = tmp_path / "report"
    result = pytester.runpytest_subprocess(str(suite_file("test_rmsnorm.py")), "--impl", "reference.triton.norms",
                                           "-k", "test_large_values", "-p", "no:cacheprovider", "--hypothesis-profile",
                                           "harness-ci", "--conformance-report", str(report))
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "bfloat16 unsupported (interpreter: tl.sum wrong in bfloat16 under triton " in out  # the header
    rows = json.loads((report / "conformance.json").read_text())["results"]
    text = json.dumps(next(r for r in rows if r["property"] == "rmsnorm.large_values"))
    assert "configs unsupported (interpreter)" in text and "interpreter: tl.sum wrong in bfloat16" in text, text
