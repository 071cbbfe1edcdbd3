"""Triton targets on a CPU: the interpreter, and the profile sized for it.

A target whose module uses Triton (``@triton.jit`` kernels) cannot run compiled without a GPU.
Triton's interpreter (``TRITON_INTERPRET=1``, read by ``triton.jit`` when it decorates a kernel)
runs the same kernels on CPU tensors, program by program in numpy. So when the device is a CPU
(or ``--triton-interpret`` forces it), the target's process sets ``TRITON_INTERPRET=1`` before
it imports the target (``prepare``). The variable does nothing for a target that never imports
triton (torch does not import it), so it is set for every such process where triton is
installed; a target counts as *interpreted* when triton was imported with it (``interpreted``).
An interpreted target's process also gets ``compiled_scalars``: a Python float kernel argument is
rounded to float32 as the compiled launch types it, so a float64 kernel fed a float ``scale``
fails on the CPU as it does on a GPU.

An interpreted kernel is about 1000x slower than a compiled one, so the suites run it on a
profile sized for the interpreter (``fit``, applied by ``harness.runner.run`` to every
configuration, drawn or explicit):

- every length of a tile-boundary regime (``suites.regimes``: 1023-token prefills, 2048-key
  decodes) becomes the kernel's own boundary class: ``T - 1``, ``T``, ``T + 1``, ``2T - 1``,
  ``2T + 1`` for the block sizes ``T`` it declares (``HARNESS_TILES = (64,)``; default
  ``DEFAULT_TILES``), and an odd length (113, 203, ...) an odd one between ``T + 1`` and ``2T``;
  lengths up to ``2 max(T) + 1`` (all the small regime's) are kept, so ``fit`` is idempotent and
  a repro line replays the fitted configuration;
- at most ``MAX_HEADS`` query heads: (Hq, Hkv) is halved while Hq is above it, keeping the group
  ratio and several KV heads ((32, 4) -> (16, 2)) or MQA ((32, 1) -> (16, 1));
- head dims, dtypes and seeds are kept; a history's calls are fitted one by one;
- a property checks at most ``EXAMPLE_SHARE`` of the Hypothesis profile's examples (10 of the
  ci and dev profiles' 30, the explicit tile-boundary examples first; ``over_budget``): the
  examples past that pass without a call; a state machine runs that many sequences
  (``machine_examples``);
- the per-call limit is ``TIMEOUT_FACTOR`` times ``--impl-timeout``.

That is the *full* tier. The *smoke* tier (``$HARNESS_INTERPRET_TIER=smoke``: CI's run of every
suite against the Triton kernels, ``tests/test_triton_suites.py``) keeps every property running one
real configuration, its first explicit tile-boundary example, with the same lengths:

- one check per property and one sequence per state machine (``budget``);
- at most ``SMOKE_MAX_HEADS`` query heads, as far as halving keeps the group ratio and several KV
  heads ((8, 4) -> (4, 2), (32, 4) -> (16, 2), (8, 2) kept; MQA (32, 1) -> (4, 1));
- ``torch.autograd.gradcheck`` in its fast mode (``gradcheck_fast``): the Jacobian projected on
  random vectors, a few kernel calls instead of two per input element (~200 for attention).

Its lengths are not cut below ``2T + 1``: at ``T + 1`` the second key block holds one key, and an
online softmax that never rescales its accumulator (``tests/planted/triton/fa_no_rescale.py``)
passed ``attention.agreement``; at ``2T + 1`` it fails, for 10 s more of the CI run.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from types import ModuleType

from harness.basics import optional

ENV = "TRITON_INTERPRET"
#: the line a Triton target without triton installed is told (also docs/running.md's): harness.basics.optional's
INSTALL = optional.install("triton")
#: the block sizes of a Triton target that declares none (``HARNESS_TILES``)
DEFAULT_TILES = (64,)
#: the per-call limit of an interpreted target, as a multiple of ``--impl-timeout``
TIMEOUT_FACTOR = 10.0
#: the per-call limit of a compiled Triton target (a GPU), as a multiple of ``--impl-timeout``: each
#: new configuration (dtype, padded head dims, causal/window flags) is JIT-compiled on its first call,
#: seconds each, and on the first H200 run (4 xdist workers compiling at once) first calls went past
#: the 20 s default
JIT_TIMEOUT_FACTOR = 6.0
#: the most query heads an interpreted call gets (``fit``)
MAX_HEADS = 16
#: the share of the Hypothesis profile's examples an interpreted target's property checks
EXAMPLE_SHARE = 1 / 3
#: checks per property of an interpreted target, fixed (``budget``; unset: ``EXAMPLE_SHARE``)
CHECKS_ENV = "HARNESS_INTERPRET_CHECKS"
#: the interpreter profile's tier: ``full`` (unset) or ``smoke`` (see the module doc)
TIER_ENV = "HARNESS_INTERPRET_TIER"
TIERS = ("full", "smoke")
#: the most query heads an interpreted call gets in the smoke tier
SMOKE_MAX_HEADS = 4
#: why ``harness bench`` records every point of an interpreted target as skipped
BENCH_SKIP = ("interpreted (TRITON_INTERPRET=1): a Triton kernel run by Triton's interpreter on a CPU is "
              "about 1000x slower than compiled, so its timings would measure the interpreter; run the "
              "benchmark on a GPU, where the kernel is compiled")
#: the header's word for an interpreted target
HEADER = "interpreted (TRITON_INTERPRET=1)"

#: per configuration class: the fields that are sequence lengths (a tuple field: each element)
LENGTH_FIELDS = {
    "AttnConfig": ("L", "S"),
    "WindowConfig": ("L", "S", "window"),
    "DropoutConfig": ("L", "S"),
    "KVCacheConfig": ("chunks", "lengths", "slack", "window"),
    "VarlenConfig": ("q_lens", "k_lens", "window"),
    "RopeConfig": ("L",),
    "NormConfig": ("lead",),
}


def mode(device: str, force: bool = False) -> str:
    """``"force"`` (``--triton-interpret``), ``"auto"`` (a CPU device) or ``"off"``."""
    if force:
        return "force"
    return "auto" if str(device).split(":")[0] == "cpu" else "off"


def prepare(how: str) -> None:
    """Before the target is imported: set ``TRITON_INTERPRET=1`` (``"force"``; ``"auto"``: unless
    the environment already sets it, and only where triton is installed)."""
    if how == "force":
        os.environ[ENV] = "1"
    elif how == "auto" and importlib.util.find_spec("triton") is not None:
        os.environ.setdefault(ENV, "1")


def interpreted(module) -> bool:
    """After the import: whether the target runs Triton kernels under the interpreter."""
    return os.environ.get(ENV) == "1" and "triton" in sys.modules and uses_triton(module)


def compiled_scalars() -> bool:
    """Make the interpreter pass a Python ``float`` argument of a kernel as compiled code does.

    Compiled, Triton types a float argument ``fp32`` (``triton.runtime.jit.mangle_type``): a
    ``scale`` or ``eps`` handed to a float64 kernel as a Python float is rounded to float32 (about
    4e-9 off in float64 outputs: the first CUDA run failed the reference Triton kernels' float64
    properties so). The interpreter passes the float through unrounded, so that bug passed every
    CPU run. Here the interpreter's argument conversion rounds a float to an ``fp32`` scalar first,
    as the compiled launch does. Idempotent; ``False`` where the interpreter cannot be patched."""
    try:
        import numpy as np
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    convert = getattr(interpreter, "_implicit_cvt", None)
    if convert is None or not hasattr(interpreter, "TensorHandle"):
        return False
    if getattr(convert, "harness_fp32_floats", False):
        return True

    def fp32_floats(arg):
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)

    fp32_floats.harness_fp32_floats = True
    interpreter._implicit_cvt = fp32_floats
    return True


def check_interpreter() -> tuple[tuple[str, ...], dict[str, str]]:
    """At an interpreted target's start, in its process: the exact fixes of
    ``harness.boundary.interpreter_fixes`` put into Triton's interpreter, then ``harness.boundary.interpreter_probe``'s
    verdict on it (cached per triton version): (the fixes in place, dtype -> why its configurations
    are unsupported here). Never raises."""
    from harness.boundary import interpreter_fixes, interpreter_probe
    try:
        fixes = interpreter_fixes.apply()
    except Exception:  # noqa: BLE001 - a triton these fixes do not fit: the probe says what is wrong
        fixes = ()
    return fixes, interpreter_probe.check_interpreter(fixes)


def interpreter_line(info) -> str:
    """The report header's line on Triton's interpreter for an interpreted target: the fixes in
    place and the dtypes it cannot be checked in here (``check_interpreter``)."""
    fixes = ", ".join(info.interpreter_fixes) or "none"
    wrong = info.interpreter_unsupported
    verdict = ("every probed operation right" if not wrong else
               "; ".join(f"{dtype} unsupported ({why})" for dtype, why in wrong.items()))
    return f"Triton's interpreter (fixes: {fixes}): {verdict}"


def interpreter_gap(exc: BaseException) -> str | None:
    """Why a call failed where the interpreter, not the kernel, lacks something: the interpreter's
    ``InterpreterError`` around a ``NotImplementedError`` (``extern_elementwise not supported in
    interpreter mode``, ``inline_asm ...``, a libdevice function ``harness.boundary.interpreter_fixes`` has
    no numpy for), as the reason ``interpreter: ... under triton X.Y`` (``runner.run`` reports the
    configuration unsupported); None otherwise. ``exc``: the call's ``ImplementationError``, its
    cause the interpreter's error (here) or its stand-in from the worker (``TargetRaised``)."""
    import re
    cause = exc.__cause__
    name = getattr(cause, "type_name", None) or type(cause).__name__
    if cause is None or name != "InterpreterError":
        return None
    text = str(getattr(cause, "message", None) or cause).strip()
    found = re.match(r"NotImplementedError\((['\"])(.*)\1\)$", text, re.S)
    if not found:
        return None
    from harness.boundary.interpreter_fixes import GAP, short_version
    what = " ".join(found.group(2).split()).removeprefix(GAP).strip()
    return f"interpreter: {what[:160]} under triton {short_version()}"


def jit_compiled(module) -> bool:
    """After the import: the target's Triton kernels are compiled (not interpreted): a GPU run."""
    return os.environ.get(ENV) != "1" and "triton" in sys.modules and uses_triton(module)


def limit_factor(info) -> float:
    """How many times ``--impl-timeout`` one call of the target described by ``info`` may take."""
    if info.interpreted:
        return TIMEOUT_FACTOR
    return JIT_TIMEOUT_FACTOR if getattr(info, "jit", False) else 1.0


def _is_triton(value) -> bool:
    name = value.__name__ if isinstance(value, ModuleType) else type(value).__module__
    return isinstance(name, str) and (name == "triton" or name.startswith("triton."))


def uses_triton(module) -> bool:
    """Whether ``module`` uses Triton: it holds triton (or a submodule) or a Triton kernel
    (``triton.jit``'s ``JITFunction``, an autotuner), or a module it holds, or the module that
    defines a function or class it holds, does (liger's RoPE adapter holds ``LigerRopeFunction``,
    whose module holds the kernels). Read from the target's own names, not from ``sys.modules``:
    in one process triton may have been imported by something else (another target, a library)."""
    seen: set[int] = set()

    def holds(mod, depth: int) -> bool:
        if id(mod) in seen:
            return False
        seen.add(id(mod))
        try:
            values = list(vars(mod).values())
        except TypeError:
            return False
        for value in values:
            try:
                if _is_triton(value):
                    return True
                if depth == 0:
                    continue
                inner = value if isinstance(value, ModuleType) else sys.modules.get(
                    getattr(value, "__module__", None) or "") if callable(value) else None
                if isinstance(inner, ModuleType) and holds(inner, depth - 1):
                    return True
            except Exception:  # noqa: BLE001 - a hostile object's attribute
                continue
        return False

    return holds(module, 1)


def tier() -> str:
    """``$TIER_ENV``: ``"full"`` (unset or empty) or ``"smoke"``; any other value is an error."""
    value = os.environ.get(TIER_ENV, "").strip() or "full"
    if value not in TIERS:
        raise ValueError(f"${TIER_ENV}={value!r}: expected one of {', '.join(TIERS)}")
    return value


def smoke() -> bool:
    return tier() == "smoke"


def budget() -> int:
    """Checks per property for an interpreted target: ``$CHECKS_ENV`` where it is set; else 1 in
    the smoke tier (the first explicit tile-boundary example); else ``EXAMPLE_SHARE`` of the
    profile's examples (at least every explicit example of the largest tile-boundary regime, 8).
    Also the sequences a state machine runs (``machine_examples``)."""
    from hypothesis import settings
    fixed = os.environ.get(CHECKS_ENV, "").strip()
    if fixed:
        return max(1, int(fixed))
    if smoke():
        return 1
    return max(8, round(settings.default.max_examples * EXAMPLE_SHARE))


def machine_examples(target) -> dict:
    """Extra Hypothesis settings of a stateful property (a state machine checks its sequences
    itself, not through ``runner.run``): an interpreted target runs ``budget()`` sequences."""
    return {"max_examples": budget()} if target.info.interpreted else {}


def gradcheck_fast(target) -> bool:
    """Whether a gradcheck property runs ``torch.autograd.gradcheck(fast_mode=True)`` for
    ``target``: an interpreted target in the smoke tier."""
    return bool(target.info.interpreted) and smoke()


def over_budget(checked: int) -> bool:
    return checked >= budget()


def missing_triton(exc: BaseException) -> bool:
    return isinstance(exc, ModuleNotFoundError) and str(getattr(exc, "name", "") or "").split(".")[0] == "triton"


def missing_message(spec: str) -> str:
    return (f"target {spec!r} uses Triton, which is not installed here: {INSTALL} "
            f"(or the harness's extra: pip install '.[triton]'); without a GPU the harness runs its "
            f"kernels under Triton's interpreter")


def shrink(value: int, tiles: tuple[int, ...]) -> int:
    """One length of a regime mapped to the kernel's own boundary class (see the module doc)."""
    top = max(tiles)
    if value <= 2 * top + 1:
        return value
    nearest = 64 * round(value / 64)
    off = value - nearest
    tile = tiles[(value // 64) % len(tiles)]
    if abs(off) <= 1:  # a boundary of the generic regime: T+off or 2T+off
        return (tile if (nearest // 64) % 2 else 2 * tile) + off
    return tile + 1 + (value % (tile - 1))  # an odd length: one strictly inside (T, 2T]


def fit(cfg, tiles: tuple[int, ...] | None):
    """``cfg`` with its lengths fitted to an interpreted kernel's tiles (unchanged when small); a
    history (``HistoryConfig``: calls held as JSON) has each of its calls fitted."""
    if type(cfg).__name__ == "HistoryConfig":
        calls = tuple(fit(c, tiles).to_json() for c in cfg.configs())
        return dataclasses.replace(cfg, calls=calls) if calls != cfg.calls else cfg
    fields = LENGTH_FIELDS.get(type(cfg).__name__)
    if not fields:
        return cfg
    tiles = tuple(tiles or DEFAULT_TILES)
    most = SMOKE_MAX_HEADS if smoke() else MAX_HEADS
    changes = {}
    for name in fields:
        value = getattr(cfg, name, None)
        if isinstance(value, tuple):
            new = tuple(shrink(v, tiles) if isinstance(v, int) else v for v in value)
        elif isinstance(value, int) and not isinstance(value, bool):
            new = shrink(value, tiles)
        else:
            continue
        if new != value:
            changes[name] = new
    hq, hkv = getattr(cfg, "hq", None), getattr(cfg, "hkv", None)
    if isinstance(hq, int) and isinstance(hkv, int) and hq > most:
        while hq > most and hq % 2 == 0 and (hkv == 1 or (hkv % 2 == 0 and hkv > 2)):  # GQA stays GQA
            hq, hkv = hq // 2, hkv // 2 if hkv > 1 else 1
        changes.update(hq=hq, hkv=hkv)
    return dataclasses.replace(cfg, **changes) if changes else cfg
