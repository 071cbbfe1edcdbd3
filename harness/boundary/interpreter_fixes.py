"""Where Triton's interpreter computes wrong and an exact fix is small, the fix, in the
interpreter's process (an interpreted target's worker, ``harness.boundary.target_import``), applied with
``harness.boundary.interpret.compiled_scalars`` and checked by ``harness.boundary.interpreter_probe``.

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
  ``_rd``) or an unlisted symbol raises ``NotImplementedError`` (``harness.boundary.interpret.interpreter_gap``
  reports the configuration unsupported, not failed). Like ``tl.exp``'s numpy, within an ulp or so
  of libdevice's, not bit for bit.

- **autotune** (``triton.autotune``): with several configs the autotuner times each on the device's
  benchmarker, ``driver.active``, and a CPU-only machine has no driver ("0 active drivers"), so an
  autotuned kernel (flash-linear-attention's norms, most library kernels) stopped before its first
  run. Under the interpreter timings mean nothing: where no driver is active, every config "takes"
  the same time, so the autotuner keeps its first config (exact: a correct kernel computes the same
  result in every config; a bug of another config is the GPU run's to find).

``apply()`` patches the interpreter's classes and module functions once per process (idempotent);
``$HARNESS_INTERPRETER_FIXES=off`` leaves the interpreter as it is (``harness.boundary.interpreter_probe``
then reports what is wrong). Float16, float32 and float64 computations are not touched.
"""
from __future__ import annotations

import importlib
import os
import sys

import numpy as np

#: set to ``off`` (or 0, no, false) to leave the interpreter unpatched
ENV = "HARNESS_INTERPRETER_FIXES"
#: the fixes, by name (``apply``'s answer; the report header shows them)
FIXES = ("bfloat16", "libdevice", "autotune")
from harness.boundary.interpreter_calls import _MARK, GAP, LIBDEVICE, patch_autotune, patch_libdevice  # noqa: E402, F401


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
    if getattr(interpreter._patch_lang, _MARK, False) or patch_libdevice(interpreter, tl):
        done.append("libdevice")
    if patch_autotune():
        done.append("autotune")
    return tuple(done)
