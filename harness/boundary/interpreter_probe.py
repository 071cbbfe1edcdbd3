"""Which operations Triton's interpreter computes right, per dtype: tiny kernels, each compared with
the exact answer computed in torch, run once per triton version and cached.

A correct Triton kernel run under the interpreter (``harness.boundary.interpret``) can fail on a CPU where
the interpreter, not the kernel, is wrong (triton 3.9.0 summed bfloat16 as the integers of its bit
patterns: ``harness.boundary.interpreter_fixes``). So before an interpreted target is checked, its worker
runs ``OPS`` on Triton's interpreter as that process has it (with ``interpreter_fixes`` applied,
unless ``$HARNESS_INTERPRETER_FIXES=off``), in float32, float16, bfloat16 and float64:

- masked loads with ``other``, and stores; +, -, *, / and negation; comparisons, ``tl.where``,
  ``tl.maximum``/``tl.minimum``; casts (float32, float64 and int32 to the dtype, rounding to nearest
  even; the dtype to int32; through float32 and back); ``tl.fma``;
- ``tl.sum`` (one axis, and all), ``tl.max``/``tl.min``, ``tl.cumsum``, ``tl.dot`` (16 x 16 x 16);
- ``tl.exp``, ``tl.exp2``, ``tl.sqrt``, ``tl.rsqrt`` (``tl.math``), ``libdevice.exp``,
  ``libdevice.sqrt``, ``libdevice.rsqrt``, on the dtype cast to float32 (what they take), the
  result cast back.

The inputs are small numbers whose exact answers every dtype holds, whatever the order or
precision of an accumulation (a sum's partial sums are integers within 256), so an exact
comparison cannot fail on rounding; the transcendental ones are allowed one unit in the last place
of the dtype. A kernel that raises counts as that operation wrong. An operation wrong in a dtype
makes every configuration of that dtype ``unsupported (interpreter: <op> wrong in <dtype> under
triton X.Y)`` for interpreted targets (``harness.boundary.loader.Target.declared_out``), never a failure;
compiled on a GPU nothing changes.

The result is cached as JSON in ``$XDG_CACHE_HOME/harness/`` (else ``~/.cache/harness/``), per
triton and numpy version, fixes on or off, and this module's and the fixes' source: a worker
start reads it (milliseconds) instead of running ~60 interpreted kernels (about a second). A cache
that cannot be read or written is passed over.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

#: triton.language and its libdevice, bound by ``_import_triton`` when a probe runs (the kernels read
#: them as globals; importing this module imports no triton: in a process that imported triton
#: without TRITON_INTERPRET=1, Triton's own tl.sum & co. would be compiled code the interpreter
#: cannot call)
tl = libdevice = None

from harness.boundary import interpreter_fixes, json_cache
from harness.boundary.json_cache import cache_dir  # noqa: F401 (the cache's folder, as this module's callers name it)
from harness.boundary.interpreter_fixes import short_version, triton_version

DTYPES = ("float32", "float16", "bfloat16", "float64")
CACHE_FILE = "interpreter_probe.json"
#: entries kept in the cache file (one per triton/numpy version and source)
CACHE_ENTRIES = 16
_SCHEMA = 1


# -- the kernels (run by Triton's interpreter: ``InterpretedFunction``, whatever TRITON_INTERPRET says)

def _k_load(X, O, N: tl.constexpr, V: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, tl.load(X + i, mask=i < V, other=-2.5))


def _k_arith(X, Y, O, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(X + i)
    y = tl.load(Y + i)
    tl.store(O + i, x * y + x - y)
    tl.store(O + N + i, -x)
    tl.store(O + 2 * N + i, x / y)


def _k_compare(X, Y, O, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(X + i)
    y = tl.load(Y + i)
    tl.store(O + i, tl.where(x > y, x, y))
    tl.store(O + N + i, tl.maximum(x, y))
    tl.store(O + 2 * N + i, tl.minimum(x, y))
    tl.store(O + 3 * N + i, tl.where(x <= 0, y, x))


def _k_cast(F32, F64, I, X, O, OI, N: tl.constexpr):
    i = tl.arange(0, N)
    dtype = O.dtype.element_ty
    tl.store(O + i, tl.load(F32 + i).to(dtype))
    tl.store(O + N + i, tl.load(F64 + i).to(dtype))
    tl.store(O + 2 * N + i, tl.load(I + i).to(dtype))
    x = tl.load(X + i)
    tl.store(O + 3 * N + i, x.to(tl.float32).to(dtype))
    tl.store(OI + i, x.to(tl.int32))


def _k_fma(X, Y, Z, O, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, tl.fma(tl.load(X + i), tl.load(Y + i), tl.load(Z + i)))


def _k_sum(X, O, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(X + r[:, None] * C + c[None, :])
    tl.store(O + r, tl.sum(x, axis=1))
    tl.store(O + R + r, tl.sum(x * x, axis=1))
    tl.store(O + 2 * R, tl.sum(x))


def _k_max_min(X, O, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    x = tl.load(X + r[:, None] * C + c[None, :])
    tl.store(O + r, tl.max(x, axis=1))
    tl.store(O + R + r, tl.min(x, axis=1))


def _k_cumsum(X, O, R: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, R)
    c = tl.arange(0, C)
    at = r[:, None] * C + c[None, :]
    tl.store(O + at, tl.cumsum(tl.load(X + at), axis=1))


def _k_dot(A, B, O, M: tl.constexpr):
    i = tl.arange(0, M)
    at = i[:, None] * M + i[None, :]
    tl.store(O + at, tl.dot(tl.load(A + at), tl.load(B + at)).to(O.dtype.element_ty))


def _k_exp(X, O, N: tl.constexpr, W: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, tl.exp(tl.load(X + i).to(W)).to(O.dtype.element_ty))


def _k_exp2(X, O, N: tl.constexpr, W: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, tl.exp2(tl.load(X + i).to(W)).to(O.dtype.element_ty))


def _k_sqrt(X, O, N: tl.constexpr, W: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, tl.sqrt(tl.load(X + i).to(W)).to(O.dtype.element_ty))


def _k_rsqrt(X, O, N: tl.constexpr, W: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, tl.math.rsqrt(tl.load(X + i).to(W)).to(O.dtype.element_ty))


def _k_ld_exp(X, O, N: tl.constexpr, W: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, libdevice.exp(tl.load(X + i).to(W)).to(O.dtype.element_ty))


def _k_ld_sqrt(X, O, N: tl.constexpr, W: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, libdevice.sqrt(tl.load(X + i).to(W)).to(O.dtype.element_ty))


def _k_ld_rsqrt(X, O, N: tl.constexpr, W: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(O + i, libdevice.rsqrt(tl.load(X + i).to(W)).to(O.dtype.element_ty))


# -- the cases: inputs, the kernel's launch, the exact answer -----------------------------------

#: 8 values and partners whose products, sums, quotients and squares are exact in bfloat16
_X = (1.0, -2.0, 3.0, -4.0, 0.5, 6.0, -7.5, 8.0)
_Y = (2.0, 4.0, -0.5, 1.0, -2.0, 0.25, 4.0, -8.0)
_Z = (0.5, -1.0, 2.0, 3.0, -0.25, 1.0, -6.0, 16.0)
#: a (4, 8) block: every partial sum of it, of its squares and along its rows is an integer within 256
_M = ((1, 2, 3, 4, -1, -2, 0, 1), (-4, 3, -2, 1, 0, 2, -1, -3),
      (2, 2, -2, -2, 1, 1, -1, -1), (4, -4, 0, 0, 3, -3, 2, -2))
_EXP_IN = (0.0, 1.0, -1.0, 0.5, 2.0, -2.0, 3.0, -0.25)
_EXP2_IN = (0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0)
_SQRT_IN = (1.0, 4.0, 16.0, 0.25, 64.0, 9.0, 2.0, 0.5)


def _import_triton() -> None:
    global tl, libdevice
    import triton.language as language
    from triton.language.extra import libdevice as functions
    tl, libdevice = language, functions


def _torch():
    import torch
    return torch


def _mantissa_bits(dtype) -> int:
    return {"float32": 23, "float16": 10, "bfloat16": 7, "float64": 52}[str(dtype).replace("torch.", "")]


def _rounding_inputs(dtype: str) -> list[float]:
    """float32-exact values that round to ``dtype`` in each way: a tie to even (down, and up), above
    a tie, a carry into the exponent, negative, and ones that are exact."""
    if dtype in ("float32", "float64"):
        return [1.0, -2.5, 3.25, 0.0, 1e-3, -7.0, 1.0 + 2 ** -20, 65504.0]
    u = 2.0 ** -_mantissa_bits(dtype)
    return [1 + u / 2, 1 + 3 * u / 2, 1 + u / 2 + u / 8, 2 - u / 4, -(1 + 3 * u / 2), 0.0, 3.0, -0.375]


def _cases(dtype: str) -> dict[str, tuple]:
    """op name -> (kernel, launch arguments builder, ulps allowed) for ``dtype``; the builder
    returns (args, kwargs, outputs, expected): the outputs are compared with the expected tensors
    after the launch, exactly or within ``ulps`` of the dtype."""
    torch = _torch()
    d = getattr(torch, dtype)
    f64 = torch.float64

    def t(values, dt=d):
        return torch.tensor(values, dtype=f64).to(dt)

    def exact(values):
        return torch.tensor(values, dtype=f64).to(d)

    x, y, z = t(_X), t(_Y), t(_Z)
    xd, yd, zd = (v.double() for v in (x, y, z))
    m = t(_M)
    md = m.double()

    def load():
        out = torch.zeros(8, dtype=d)
        return (x, out), {"N": 8, "V": 6}, [out], [exact([*_X[:6], -2.5, -2.5])]

    def arith():
        out = torch.zeros(24, dtype=d)
        want = torch.cat([xd * yd + xd - yd, -xd, xd / yd]).to(d)
        return (x, y, out), {"N": 8}, [out], [want]

    def compare():
        out = torch.zeros(32, dtype=d)
        want = torch.cat([torch.where(xd > yd, xd, yd), torch.maximum(xd, yd), torch.minimum(xd, yd),
                          torch.where(xd <= 0, yd, xd)]).to(d)
        return (x, y, out), {"N": 8}, [out], [want]

    def cast():
        values = _rounding_inputs(dtype)
        f32 = torch.tensor(values, dtype=torch.float32)
        f64_in = torch.tensor(values, dtype=f64)
        ints = torch.tensor([0, 1, -1, 7, -100, 255, 256, -3], dtype=torch.int32)
        halves = t([2.5, -2.5, 3.75, -0.5, 0.0, 7.0, -7.75, 100.0])
        out = torch.zeros(32, dtype=d)
        out_int = torch.zeros(8, dtype=torch.int32)
        want = torch.cat([f32.to(d), f64_in.to(d), ints.double().to(d), halves])
        want_int = halves.double().trunc().to(torch.int32)
        return (f32, f64_in, ints, halves, out, out_int), {"N": 8}, [out, out_int], [want, want_int]

    def fma():
        out = torch.zeros(8, dtype=d)
        return (x, y, z, out), {"N": 8}, [out], [(xd * yd + zd).to(d)]

    def sums():
        out = torch.zeros(9, dtype=d)
        want = torch.cat([md.sum(1), (md * md).sum(1), md.sum().reshape(1)]).to(d)
        return (m, out), {"R": 4, "C": 8}, [out], [want]

    def max_min():
        out = torch.zeros(8, dtype=d)
        want = torch.cat([md.max(1).values, md.min(1).values]).to(d)
        return (m, out), {"R": 4, "C": 8}, [out], [want]

    def cumsum():
        out = torch.zeros(4, 8, dtype=d)
        return (m, out), {"R": 4, "C": 8}, [out], [md.cumsum(1).to(d)]

    def dot():
        a = torch.tensor([[((i * 3 + j * 5) % 5) - 2 for j in range(16)] for i in range(16)], dtype=f64)
        b = torch.tensor([[((i * 7 + j) % 5) - 2 for j in range(16)] for i in range(16)], dtype=f64)
        out = torch.zeros(16, 16, dtype=d)
        return (a.to(d), b.to(d), out), {"M": 16}, [out], [(a @ b).to(d)]

    def unary(values, fn):
        def build():
            inp = t(values)
            out = torch.zeros(8, dtype=d)
            wide = tl.float64 if dtype == "float64" else tl.float32  # (what tl.exp & co. take)
            return (inp, out), {"N": 8, "W": wide}, [out], [fn(inp.double()).to(d)]
        return build

    exp = unary(_EXP_IN, torch.exp)
    sqrt = unary(_SQRT_IN, torch.sqrt)
    rsqrt = unary(_SQRT_IN, torch.rsqrt)
    return {
        "tl.sum": (_k_sum, sums, 0),
        "tl.dot": (_k_dot, dot, 0),
        "arithmetic": (_k_arith, arith, 0),
        "cast": (_k_cast, cast, 0),
        "tl.max/tl.min": (_k_max_min, max_min, 0),
        "tl.cumsum": (_k_cumsum, cumsum, 0),
        "comparison/tl.where": (_k_compare, compare, 0),
        "tl.fma": (_k_fma, fma, 0),
        "masked load": (_k_load, load, 0),
        "tl.exp": (_k_exp, exp, 1),
        "tl.exp2": (_k_exp2, unary(_EXP2_IN, torch.exp2), 0),
        "tl.sqrt": (_k_sqrt, sqrt, 1),
        "tl.rsqrt": (_k_rsqrt, rsqrt, 1),
        "libdevice.exp": (_k_ld_exp, exp, 1),
        "libdevice.sqrt": (_k_ld_sqrt, sqrt, 1),
        "libdevice.rsqrt": (_k_ld_rsqrt, rsqrt, 1),
    }


#: the operations probed, in the order a reason names them (each one kernel: ``_cases``)
OPS = ("tl.sum", "tl.dot", "arithmetic", "cast", "tl.max/tl.min", "tl.cumsum", "comparison/tl.where", "tl.fma",
       "masked load", "tl.exp", "tl.exp2", "tl.sqrt", "tl.rsqrt", "libdevice.exp", "libdevice.sqrt",
       "libdevice.rsqrt")


def _ulps(got, want, dtype) -> float:
    """The largest distance of ``got`` from ``want`` in units of the dtype's last place at ``want``."""
    torch = _torch()
    g, w = got.double().flatten(), want.double().flatten()
    if got.dtype in (torch.int32, torch.int64):
        return float((g - w).abs().max()) if g.numel() else 0.0
    spacing = torch.clamp(w.abs(), min=torch.finfo(want.dtype).tiny) * 2.0 ** -_mantissa_bits(want.dtype)
    same = (g == w) | (torch.isnan(g) & torch.isnan(w))
    far = (g - w).abs() / spacing
    far = torch.where(same, torch.zeros_like(far), torch.nan_to_num(far, nan=float("inf")))  # (a NaN never passes)
    return float(far.max()) if g.numel() else 0.0


def _short(tensor) -> str:
    values = tensor.double().flatten().tolist()[:8]
    return "[" + ", ".join(f"{v:.6g}" for v in values) + ("]" if tensor.numel() <= 8 else ", ...]")


def run_case(kernel, build, ulps: int) -> str | None:
    """One probe: None when the interpreter's answer is right, else what it got (or raised)."""
    from triton.runtime.interpreter import InterpretedFunction
    args, kwargs, outs, wants = build()
    try:
        InterpretedFunction(kernel)[(1,)](*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a kernel that raises: that operation is wrong
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
        return f"raised {text[:200]}"
    for got, want in zip(outs, wants):
        if _ulps(got, want, want.dtype) > ulps:
            return f"got {_short(got)}, want {_short(want)}"
    return None


def probe(dtypes=DTYPES) -> dict[str, dict[str, str | None]]:
    """Run every probe in each of ``dtypes`` on this process's interpreter: dtype -> op -> None
    (right) or what went wrong. Raises where triton was imported without ``TRITON_INTERPRET=1``
    (its ``tl.sum`` & co. are then compiled code the interpreter cannot call: so would a target's
    kernels find them)."""
    _import_triton()
    from triton.runtime.interpreter import InterpretedFunction
    if not isinstance(tl.standard.sum, InterpretedFunction):
        raise RuntimeError("triton was imported without TRITON_INTERPRET=1, so its tl.sum, tl.max, ... are "
                           "compiled functions the interpreter cannot call")
    results: dict[str, dict[str, str | None]] = {}
    for dtype in dtypes:
        results[dtype] = {}
        try:
            cases = _cases(dtype)
        except Exception as exc:  # noqa: BLE001 - the inputs themselves failed: every op unknown
            results[dtype] = {op: f"the probe's inputs failed: {type(exc).__name__}: {exc}" for op in OPS}
            continue
        for op in OPS:
            kernel, build, ulps = cases[op]
            try:
                results[dtype][op] = run_case(kernel, build, ulps)
            except Exception as exc:  # noqa: BLE001 - building or comparing failed: counted wrong
                results[dtype][op] = f"the probe failed: {type(exc).__name__}: {exc}"[:240]
    return results


# -- the cache ---------------------------------------------------------------------------------

def cache_key(fixes: tuple[str, ...]) -> str:
    import numpy
    from harness.boundary import interpreter_calls
    sources = b"".join(Path(m.__file__).read_bytes() for m in (interpreter_fixes, interpreter_calls, _this_module()))
    digest = hashlib.sha1(sources).hexdigest()[:12]
    return f"triton {triton_version()}; numpy {numpy.__version__}; fixes {','.join(fixes) or 'off'}; source {digest}"


def _this_module():
    import sys
    return sys.modules[__name__]


def cached_probe(fixes: tuple[str, ...]) -> dict[str, dict[str, str | None]]:
    """``probe()``'s result for this process's interpreter (``fixes``: what
    ``interpreter_fixes.apply`` put in place), from the cache when it holds one for this triton,
    numpy and source, else run and stored."""
    path = json_cache.cache_dir() / CACHE_FILE
    key = cache_key(fixes)
    data = json_cache.read(path, _SCHEMA)
    entries = data.get("entries") if isinstance(data.get("entries"), dict) else {}
    hit = entries.get(key)
    if isinstance(hit, dict) and set(hit) >= set(DTYPES) and all(
            isinstance(hit[d], dict) and set(hit[d]) == set(OPS) for d in DTYPES):
        return {d: dict(hit[d]) for d in DTYPES}
    results = probe()
    entries = {k: v for k, v in entries.items() if k != key}
    kept = dict(list(entries.items())[-(CACHE_ENTRIES - 1):])
    kept[key] = results
    json_cache.write(path, {"schema": _SCHEMA, "entries": kept})
    return results


def wrong_ops(results: dict[str, dict[str, str | None]], dtype: str) -> list[str]:
    return [op for op in OPS if (results.get(dtype) or {}).get(op, "not probed") is not None]


def reason(ops: list[str], dtype: str, version: str | None = None) -> str:
    """``interpreter: tl.sum, tl.dot wrong in bfloat16 under triton 3.9`` (the cell's words)."""
    shown = ", ".join(ops[:3]) + (f" and {len(ops) - 3} more" if len(ops) > 3 else "")
    return f"interpreter: {shown} wrong in {dtype} under triton {short_version(version)}"


def unsupported_dtypes(results: dict[str, dict[str, str | None]]) -> dict[str, str]:
    """dtype -> the reason its configurations are unsupported for an interpreted target (only the
    dtypes with an operation wrong)."""
    version = triton_version()
    return {d: reason(ops, d, version) for d in DTYPES if (ops := wrong_ops(results, d))}


def check_interpreter(fixes: tuple[str, ...]) -> dict[str, str]:
    """At an interpreted target's start: the dtypes its configurations cannot be checked in here
    (``unsupported_dtypes`` of ``cached_probe``). Never raises: a probe that cannot run at all
    makes every dtype unsupported, with why."""
    try:
        return unsupported_dtypes(cached_probe(fixes))
    except Exception as exc:  # noqa: BLE001 - the probe itself broke: nothing here is vouched for
        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:160]
        return {d: f"interpreter: the probe could not run ({why}) under triton {short_version()}" for d in DTYPES}
