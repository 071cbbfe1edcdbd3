"""Where Triton's interpreter computes wrong and an exact fix is small, the fix, in the
interpreter's process (an interpreted target's worker, ``harness.target_import``), applied with
``harness.interpret.compiled_scalars`` and checked by ``harness.interpreter_probe``.

What triton 3.9.0's interpreter (``triton/runtime/interpreter.py``) gets wrong, read in its source:

- **bfloat16.** numpy has no bfloat16, so the interpreter holds one as its 16 bits in a ``uint16``
  array, and every numpy operation on it then works on those integers: ``x + y``, ``x * y``,
  ``-x``, comparisons, ``tl.where``'s ``>``, ``tl.fma``, ``tl.sum`` (``np.sum`` of the bit
  patterns: the sum of 1, 2, 3, 4 comes back as 5.9e-39), ``tl.cumsum``, ``tl.argmax``, ``tl.dot``
  (``np.matmul`` of the bit patterns), casts from float64 or an integer (``astype(uint16)``), and
  float32 -> bfloat16 truncates (``_convert_float`` without a rounding mode) where compiled code
  rounds to nearest even. Only loads, stores, ``tl.max``/``tl.min`` (which cast to float32 first)
  and bfloat16 -> float32 are right.
- **libdevice.** ``triton.language.extra.libdevice`` holds stubs whose body is ``...`` (compiled
  code swaps in the backend's function), so under the interpreter ``libdevice.rsqrt(x)`` is None;
  the CUDA module's functions (``triton.language.extra.cuda.libdevice``) need a ``_semantic`` the
  interpreter does not pass, and the interpreter's ``create_extern_elementwise`` raises.

The fixes, each what compiled code computes:

- bfloat16 is decoded to float32 (exact: a bfloat16 is a float32's top 16 bits), the operation runs
  in float32 and the result is rounded to nearest even into bfloat16. For +, -, * that is the
  correctly rounded bfloat16 result the GPU's bfloat16 instructions give: rounding twice, to 24
  bits then to 8, equals rounding once when 24 >= 2 * 8 + 2 (double rounding is innocuous for
  +, -, *, /, sqrt at that width). float64 and integer -> bfloat16 round once (to float32 by
  round-to-odd, then to nearest even: exact), as ``cvt.rn.bf16.f64`` does; ``tl.fma`` rounds once.
- ``tl.dot`` with bfloat16 operands multiplies them in float32, where a product of two bfloat16
  is exact, and accumulates in float32 (the interpreter's float16 dot does the same).
- ``tl.sum`` and ``tl.cumsum`` of bfloat16 add in bfloat16, each addition rounded, as compiled
  Triton does: ``tl.sum`` keeps the input dtype for floats (``_pick_sum_dtype``) and the reduction
  adds in it (PyTorch's Inductor casts bfloat16 reductions to float32 itself for that reason,
  pytorch/pytorch#141052; triton-lang/triton#6961 proposes an opt-in promotion). The order is not
  the GPU's (that follows the layout: each thread's elements in turn, then a tree across lanes and
  warps): ``tl.sum`` adds in a pairwise tree, ``tl.cumsum`` in sequence, so the last bits of a
  long sum may differ from the GPU's, as a float32 sum's do; what a bfloat16 accumulation loses,
  it loses here too. (numpy's float16 ``np.sum`` accumulates in float32 and rounds once, more
  precisely than compiled code: not changed here, see docs/running.md.)
- libdevice: its functions are called with the interpreter's semantic, and the NVIDIA libdevice
  symbols they dispatch to (``__nv_rsqrtf``, ...) run as numpy functions in the argument's
  precision (``LIBDEVICE``): the round-to-nearest ones; a directed rounding (``_rz``, ``_ru``,
  ``_rd``) or an unlisted symbol raises ``NotImplementedError`` (``harness.interpret.interpreter_gap``
  reports the configuration unsupported, not failed). Like ``tl.exp``'s numpy, within an ulp or so
  of libdevice's, not bit for bit.

- **autotune** (``triton.autotune``): with several configs the autotuner times each on the device's
  benchmarker, ``driver.active``, and a CPU-only machine has no driver ("0 active drivers"), so an
  autotuned kernel (flash-linear-attention's norms, most library kernels) stopped before its first
  run. Under the interpreter timings mean nothing: where no driver is active, every config "takes"
  the same time, so the autotuner keeps its first config (exact: a correct kernel computes the same
  result in every config; a bug of another config is the GPU run's to find).

``apply()`` patches the interpreter's classes and module functions once per process (idempotent);
``$HARNESS_INTERPRETER_FIXES=off`` leaves the interpreter as it is (``harness.interpreter_probe``
then reports what is wrong). Float16, float32 and float64 computations are not touched.
"""
from __future__ import annotations

import importlib
import math
import os
import sys

import numpy as np

#: set to ``off`` (or 0, no, false) to leave the interpreter unpatched
ENV = "HARNESS_INTERPRETER_FIXES"
#: the fixes, by name (``apply``'s answer; the report header shows them)
FIXES = ("bfloat16", "libdevice", "autotune")
#: the start of a NotImplementedError message of these fixes (``harness.interpret.interpreter_gap``)
GAP = "interpreter:"
_MARK = "harness_interpreter_fix"


def triton_version() -> str:
    """The installed triton's version, without importing it where it is not imported yet (the
    harness's own process reads it for a reason's words)."""
    module = sys.modules.get("triton")
    version = getattr(module, "__version__", None)
    if isinstance(version, str):
        return version
    try:
        from importlib.metadata import version as installed
        return installed("triton")
    except Exception:  # noqa: BLE001 - not installed, or broken metadata
        return "?"


def short_version(version: str | None = None) -> str:
    """X.Y of triton's version (a reason's words: ``under triton 3.9``)."""
    return ".".join((version or triton_version()).split(".")[:2])


def enabled() -> bool:
    return os.environ.get(ENV, "").strip().lower() not in ("off", "0", "no", "false")


# -- bfloat16 <-> float32, bit exact -----------------------------------------------------------

def bf16_to_f32(bits) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32, exact."""
    return (np.asarray(bits).astype(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(values) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even; NaN stays NaN, a value
    past bfloat16's largest finite one rounds to inf, as a GPU's ``cvt.rn.bf16.f32``."""
    f = np.asarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(np.isnan(f), quiet, rounded).astype(np.uint16)


def f64_to_bf16(values) -> np.ndarray:
    """float64 -> bfloat16 bit patterns rounded once to nearest even: to float32 by round-to-odd
    (truncate, then set the last bit where anything was dropped: exact for a second rounding to 8
    bits, 24 >= 8 + 2), then to nearest even."""
    d = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        f = d.astype(np.float32)
    back = f.astype(np.float64)
    inexact = np.isfinite(d) & (back != d)
    bits = f.view(np.uint32).copy()
    bits = np.where(inexact & (np.abs(back) > np.abs(d)), bits - np.uint32(1), bits)  # toward zero
    bits = np.where(inexact, bits | np.uint32(1), bits)
    return f32_to_bf16(bits.astype(np.uint32).view(np.float32))


def round_bf16(values) -> np.ndarray:
    """float32 values rounded to bfloat16, as float32 (the value a bfloat16 operation keeps)."""
    return bf16_to_f32(f32_to_bf16(values))


# -- the interpreter's builder and reductions, for bfloat16 --------------------------------------

def _is_bf16(handle, tl) -> bool:
    """A bfloat16 operand: its type says so and it holds bit patterns (the interpreter stamps a
    comparison's booleans with its operands' type: those are not)."""
    dtype = getattr(handle, "dtype", None)
    return getattr(dtype, "scalar", dtype) == tl.bfloat16 and np.asarray(handle.data).dtype == np.uint16


def _float_view(handle, tl) -> np.ndarray:
    return bf16_to_f32(handle.data) if _is_bf16(handle, tl) else handle.data


def _encode(out):
    """A result computed in float32 for a bfloat16 operation: its bfloat16 bits (a float result) or
    itself (a comparison's booleans)."""
    out = np.asarray(out)
    return f32_to_bf16(out) if out.dtype.kind == "f" else out


def _tree_sum_bf16(values: np.ndarray) -> np.ndarray:
    """Sum over the last axis of bfloat16 values held as float32, every addition rounded to
    bfloat16, in a pairwise tree (half the lanes added to the other half, as a warp's shuffle
    reduction does)."""
    while values.shape[-1] > 1:
        n = values.shape[-1]
        half = n // 2
        pairs = round_bf16(values[..., :half] + values[..., half:2 * half])
        values = np.concatenate([pairs, values[..., 2 * half:]], axis=-1) if n % 2 else pairs
    return values[..., 0]


def _scan_bf16(values: np.ndarray, axis: int, op) -> np.ndarray:
    """A running sum or product of bfloat16 values (float32) along ``axis``, each step rounded."""
    values = np.moveaxis(values, axis, 0).copy()
    for i in range(1, values.shape[0]):
        values[i] = round_bf16(op(values[i - 1], values[i]))
    return np.moveaxis(values, 0, axis)


def _patch_bf16(interpreter, tl) -> None:
    builder = interpreter.InterpreterBuilder
    TensorHandle = interpreter.TensorHandle

    binary_op = builder.binary_op

    def bf16_binary_op(self, lhs, rhs, op):
        if not (_is_bf16(lhs, tl) or _is_bf16(rhs, tl)):
            return binary_op(self, lhs, rhs, op)
        out = _encode(op(_float_view(lhs, tl), _float_view(rhs, tl)))
        return TensorHandle(out, tl.int1 if out.dtype == np.bool_ else lhs.dtype.scalar)

    unary_op = builder.unary_op

    def bf16_unary_op(self, arg, op):
        if not _is_bf16(arg, tl):
            return unary_op(self, arg, op)
        return TensorHandle(_encode(op(bf16_to_f32(arg.data))), arg.dtype.scalar)

    ternary_op = builder.ternary_op

    def bf16_ternary_op(self, lhs, rhs, other, op):
        if op is np.where or not any(_is_bf16(h, tl) for h in (lhs, rhs, other)):
            return ternary_op(self, lhs, rhs, other, op)  # (a select moves bit patterns: right as it is)
        out = op(_float_view(lhs, tl), _float_view(rhs, tl), _float_view(other, tl))
        return TensorHandle(_encode(out), other.dtype.scalar)

    create_fma = builder.create_fma

    def bf16_fma(self, x, y, z):
        if not _is_bf16(z, tl):
            return create_fma(self, x, y, z)
        a, b, c = np.broadcast_arrays(*(_float_view(h, tl).astype(np.float64) for h in (x, y, z)))
        product = a * b  # exact: 16 bits
        s = product + c
        low = s - product  # TwoSum: s + err == product + c exactly
        err = (product - (s - low)) + (c - low)
        bits = s.view(np.uint64).copy()  # round-to-odd at 53 bits, so the last rounding is the only one
        inexact = np.isfinite(s) & (err != 0)
        bits = np.where(inexact & (np.sign(err) != np.sign(s)) & (s != 0), bits - np.uint64(1), bits)
        bits = np.where(inexact, bits | np.uint64(1), bits)
        return TensorHandle(f64_to_bf16(bits.astype(np.uint64).view(np.float64)), z.dtype.scalar)

    cast_impl = builder.cast_impl

    def bf16_cast_impl(self, src, dst_type):
        src_t, dst_t = src.dtype.scalar, dst_type.scalar
        if src_t == tl.bfloat16 and not _is_bf16(src, tl):  # (a comparison's booleans stamped bfloat16)
            return cast_impl(self, src, dst_type)
        if src_t == tl.bfloat16 and dst_t != tl.bfloat16:
            f = bf16_to_f32(src.data)
            data = f if dst_t == tl.float32 else f.astype(interpreter._get_np_dtype(dst_type))
            return TensorHandle(data, dst_t)
        if dst_t == tl.bfloat16 and src_t != tl.bfloat16:
            data = f32_to_bf16(src.data) if src_t == tl.float32 else f64_to_bf16(np.asarray(src.data).astype(np.float64))
            return TensorHandle(data, dst_t)
        return cast_impl(self, src, dst_type)

    create_dot = builder.create_dot

    def bf16_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if not (_is_bf16(a, tl) or _is_bf16(b, tl)):
            return create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)
        acc = d.data.dtype if not _is_bf16(d, tl) else np.float32
        out = np.matmul(_float_view(a, tl), _float_view(b, tl), dtype=acc) + _float_view(d, tl)
        return TensorHandle(_encode(out) if _is_bf16(d, tl) else out.astype(d.data.dtype), d.dtype.scalar)

    reduce_ops, scan_ops = interpreter.ReduceOps, interpreter.ScanOps
    reduce_sum = reduce_ops.sum

    def bf16_sum(self, input):
        if input.dtype.scalar != tl.bfloat16:
            return reduce_sum(self, input)
        values = bf16_to_f32(input.handle.data)
        if self.axis is None:
            total = _tree_sum_bf16(values.reshape(-1))
            out = total.reshape((1,) * values.ndim) if self.keep_dims else total
        else:
            out = _tree_sum_bf16(np.moveaxis(values, self.axis, -1))
            if self.keep_dims:
                out = np.expand_dims(out, self.axis)
        return self.to_tensor(f32_to_bf16(out), input.dtype)

    min_max = reduce_ops.min_max

    def bf16_min_max(self, input, val_reduce_op, idx_reduce_op=None):
        tensor = input[0] if isinstance(input, tuple) else input
        if tensor.dtype.scalar != tl.bfloat16:
            return min_max(self, input, val_reduce_op, idx_reduce_op)
        values = bf16_to_f32(tensor.handle.data)
        kw = dict(axis=self.axis, keepdims=self.keep_dims)
        val = self.to_tensor(f32_to_bf16(val_reduce_op(values, **kw)), tensor.dtype) if val_reduce_op else None
        idx = self.to_tensor(idx_reduce_op(values, **kw), tl.int32) if idx_reduce_op else None
        if val is not None and idx is not None:
            return val, idx
        if val is None and idx is None:
            raise ValueError("val_reduce_op and idx_reduce_op are both None")
        return val if val is not None else idx

    cumsum, cumprod = scan_ops.cumsum, scan_ops.cumprod

    def scan(original, op):
        def bf16_scan(self, input):
            if input.dtype.scalar != tl.bfloat16:
                return original(self, input)
            out = _scan_bf16(bf16_to_f32(input.handle.data), self.axis, op)
            return [self.to_tensor(f32_to_bf16(out), input.dtype)]
        return bf16_scan

    for owner, name, fn in ((builder, "binary_op", bf16_binary_op), (builder, "unary_op", bf16_unary_op),
                            (builder, "ternary_op", bf16_ternary_op), (builder, "create_fma", bf16_fma),
                            (builder, "cast_impl", bf16_cast_impl), (builder, "create_dot", bf16_dot),
                            (reduce_ops, "sum", bf16_sum), (reduce_ops, "min_max", bf16_min_max),
                            (scan_ops, "cumsum", scan(cumsum, np.add)), (scan_ops, "cumprod", scan(cumprod, np.multiply))):
        setattr(fn, _MARK, True)
        setattr(owner, name, fn)
    # the casts the builder binds at class creation (``create_fp_ext = lambda ...: self.cast_impl``)
    # look cast_impl up on the instance, so they follow; nothing else holds the old functions


# -- libdevice ---------------------------------------------------------------------------------

def _round_half_away(x):
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(x.dtype)


def _erf(x):
    return np.vectorize(math.erf, otypes=[x.dtype])(x)


def _erfc(x):
    return np.vectorize(math.erfc, otypes=[x.dtype])(x)


def _libdevice_table() -> dict:
    """NVIDIA libdevice symbol -> numpy function of the arguments' arrays (float32 for the ``f``
    symbols, float64 for the others): every round-to-nearest function of
    ``triton.language.extra.cuda.libdevice`` a transformer kernel is likely to call."""
    one = {
        "abs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "rint": np.rint,
        "nearbyint": np.rint, "round": _round_half_away, "exp": np.exp, "exp2": np.exp2,
        "exp10": lambda x: np.power(x.dtype.type(10), x), "expm1": np.expm1, "log": np.log, "log2": np.log2,
        "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda x: x.dtype.type(1) / np.sqrt(x),
        "sin": np.sin, "cos": np.cos, "tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
        "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
        "atanh": np.arctanh, "erf": _erf, "erfc": _erfc, "cbrt": np.cbrt, "rcbrt": lambda x: x.dtype.type(1) / np.cbrt(x),
        "rcp": lambda x: x.dtype.type(1) / x,
    }
    two = {"pow": np.power, "fmod": np.fmod, "hypot": np.hypot, "copysign": np.copysign, "atan2": np.arctan2,
           "fdim": lambda x, y: np.where(x > y, x - y, x.dtype.type(0)), "div": np.divide, "add": np.add,
           "sub": np.subtract, "mul": np.multiply}
    table = {}
    for name, fn in {**one, **two}.items():
        table[f"__nv_{name}f"] = table[f"__nv_{name}"] = fn
    table.update({
        "__nv_fabsf": np.abs, "__nv_fabs": np.abs, "__nv_abs": np.abs, "__nv_llabs": np.abs,
        "__nv_saturatef": lambda x: np.clip(x, x.dtype.type(0), x.dtype.type(1)),
        "__nv_powif": lambda x, n: np.power(x, n.astype(x.dtype)), "__nv_powi": lambda x, n: np.power(x, n.astype(x.dtype)),
        "__nv_fmaf": None, "__nv_fma": None, "__nv_fmaf_rn": None, "__nv_fma_rn": None,  # (``_fma``)
        "__nv_frsqrt_rn": one["rsqrt"], "__nv_fast_fdividef": np.divide,
        "__nv_isnanf": np.isnan, "__nv_isnand": np.isnan, "__nv_isinff": np.isinf, "__nv_isinfd": np.isinf,
        "__nv_signbitf": np.signbit, "__nv_signbitd": np.signbit, "__nv_finitef": np.isfinite,
        "__nv_isfinited": np.isfinite,
    })
    for name in ("exp", "log", "log2", "log10", "exp10", "sin", "cos", "tan"):
        table[f"__nv_fast_{name}f"] = table[f"__nv_{name}f"]
    table["__nv_fast_powf"] = np.power
    for op in ("div", "rcp", "sqrt", "add", "sub", "mul"):  # the _rn (round-to-nearest) forms
        table[f"__nv_f{op}_rn"] = table[f"__nv_d{op}_rn"] = table[f"__nv_{op}"]
    return table


LIBDEVICE = _libdevice_table()


def _fma(x, y, z):
    """libdevice's fma: one rounding (the interpreter's own, as its ``tl.fma`` uses)."""
    from triton.runtime import interpreter
    fma = interpreter._interpreter.fma_fp64 if x.dtype == np.float64 else interpreter._interpreter.fma_fp32
    return fma(*np.broadcast_arrays(x, y, z))


def _extern_elementwise(interpreter):
    def create_extern_elementwise(self, libName, libPath, symbol, argList, retType, isPure):
        if symbol not in LIBDEVICE:
            raise NotImplementedError(f"{GAP} libdevice's {symbol} is not implemented under the interpreter "
                                      f"(harness.interpreter_fixes.LIBDEVICE lists the ones that are)")
        fn = LIBDEVICE[symbol] or _fma
        args = [np.asarray(h.data) for h in argList]
        with np.errstate(all="ignore"):
            out = np.asarray(fn(*args))
        scalar = getattr(retType, "scalar", retType)
        return interpreter.TensorHandle(out.astype(interpreter._get_np_dtype(scalar)), scalar)

    setattr(create_extern_elementwise, _MARK, True)
    return create_extern_elementwise


#: the libdevice modules a kernel calls through: the backend-neutral stubs and NVIDIA's
STUBS = "triton.language.extra.libdevice"
CUDA = "triton.language.extra.cuda.libdevice"


def _patch_libdevice(interpreter, tl) -> bool:
    try:
        stub = importlib.import_module(STUBS)
        cuda = importlib.import_module(CUDA)
    except ImportError:
        return False
    builtins = {name: fn for name, fn in vars(cuda).items() if tl.core.is_builtin(fn)}

    def bind(member):
        def call(*args, **kwargs):
            kwargs.pop("_semantic", None)
            return member(*args, **kwargs, _semantic=interpreter.interpreter_semantic)
        call.__name__ = member.__name__
        return call

    bound = {name: bind(fn) for name, fn in builtins.items()}
    stubs = {id(value): name for name, value in vars(stub).items() if name in bound}
    stubs.update({id(value): name for name, value in builtins.items()})
    patch_lang = interpreter._patch_lang

    def patch_lang_and_libdevice(fn):
        """The interpreter's patches for one kernel call (restored after it), and libdevice's:
        the two modules' functions, and a libdevice function the kernel's module imported by name."""
        scope = patch_lang(fn)
        for module in (stub, cuda):
            for name, call in bound.items():
                if name in vars(module):
                    scope.set_attr(module, name, call)
        home = sys.modules.get(getattr(fn, "__module__", None) or "")
        if home is not None and getattr(fn, "__globals__", None) is vars(home):
            for name, value in list(vars(home).items()):
                if id(value) in stubs and callable(value):
                    scope.set_attr(home, name, bound[stubs[id(value)]])
        return scope

    setattr(patch_lang_and_libdevice, _MARK, True)
    interpreter._patch_lang = patch_lang_and_libdevice
    interpreter.InterpreterBuilder.create_extern_elementwise = _extern_elementwise(interpreter)
    return True


def apply() -> tuple[str, ...]:
    """Patch Triton's interpreter in this process (once; idempotent): the names of the fixes in
    place (``FIXES``), () when ``$HARNESS_INTERPRETER_FIXES`` is off or the interpreter is not the
    one these fixes were written against (its functions missing)."""
    if not enabled():
        return ()
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return ()
    needed = ("InterpreterBuilder", "TensorHandle", "ReduceOps", "ScanOps", "_get_np_dtype", "_patch_lang",
              "interpreter_semantic")
    if not all(hasattr(interpreter, n) for n in needed):
        return ()
    builder = interpreter.InterpreterBuilder
    if not all(hasattr(builder, n) for n in ("binary_op", "unary_op", "ternary_op", "create_fma", "cast_impl",
                                              "create_dot", "create_extern_elementwise")):
        return ()
    done = []
    if not getattr(builder.binary_op, _MARK, False):
        _patch_bf16(interpreter, tl)
    done.append("bfloat16")
    if getattr(interpreter._patch_lang, _MARK, False) or _patch_libdevice(interpreter, tl):
        done.append("libdevice")
    if _patch_autotune():
        done.append("autotune")
    return tuple(done)


def _patch_autotune() -> bool:
    """``Autotuner.do_bench`` without a device driver: equal timings, so the first config is kept."""
    try:
        from triton.runtime import autotuner
    except ImportError:
        return False
    tuner = autotuner.Autotuner
    current = tuner.__dict__.get("do_bench")
    if getattr(getattr(current, "fget", None), _MARK, False):
        return True
    if current is None or not hasattr(current, "func"):  # (not the cached_property these lines know)
        return False
    original = current.func

    def do_bench(self):
        if getattr(self, "_do_bench", None) is not None:
            return self._do_bench
        try:
            return original(self)  # the device's benchmarker (a GPU: nothing changes)
        except RuntimeError:  # no active driver: the interpreter on a CPU
            return lambda kernel_call, quantiles=None, **kw: [0.0] * (len(quantiles) if quantiles else 1)

    fixed = property(do_bench)
    setattr(fixed.fget, _MARK, True)
    tuner.do_bench = fixed
    return True
