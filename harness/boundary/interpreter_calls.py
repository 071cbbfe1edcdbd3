"""What a Triton kernel calls that the interpreter lacks on a CPU: libdevice's functions (stubs that
return None under triton 3.9's interpreter) and the autotuner's benchmarker (the device's, which a
machine without a GPU driver does not have). Two of ``harness.boundary.interpreter_fixes``' fixes
("libdevice", "autotune"); see its docstring for what each does and why it is exact.
"""
from __future__ import annotations

import importlib
import math
import sys

import numpy as np

#: the start of a NotImplementedError message of these fixes (``harness.boundary.interpret.interpreter_gap``)
GAP = "interpreter:"
_MARK = "harness_interpreter_fix"


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
                                      f"(harness.boundary.interpreter_calls.LIBDEVICE lists the ones that are)")
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


def patch_libdevice(interpreter, tl) -> bool:
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


def patch_autotune() -> bool:
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
