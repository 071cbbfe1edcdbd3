"""A target's optional module-level declarations, read and validated in one place.

    HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right"}  # named conventions it follows
    HARNESS_DTYPES = ("float16", "bfloat16")                    # dtypes it supports
    HARNESS_SIZES = {"E": range(16, 257, 8)}                    # config field -> allowed values
    HARNESS_UNSUPPORTED = {"attn_mask", "dropout", "float64"}   # features it does not take
    HARNESS_TILES = (64,)                                       # a Triton kernel's block sizes

A declaration that cannot mean anything (``HARNESS_DTYPES = 7``, a string where a tuple belongs,
an empty range, an unknown convention value) is a ``DeclarationError``: the target does not load,
and the message names the declaration and what it should look like.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

from harness.spec import protocol
from harness.spec.conventions import DECLARATION_ATTR, KNOWN

DTYPE_NAMES = ("float16", "bfloat16", "float32", "float64")
_MISSING = object()


class DeclarationError(Exception):
    """A ``HARNESS_*`` declaration that is malformed."""


def _get(module: ModuleType, name: str) -> Any:
    try:
        return getattr(module, name, None)
    except Exception as exc:  # noqa: BLE001 - a module __getattr__ that raises
        raise DeclarationError(f"reading {name} raised {type(exc).__name__}: {exc}") from None


def conventions(module: ModuleType) -> dict[str, str]:
    declared = _get(module, DECLARATION_ATTR)
    if declared is None:
        return {}
    if not isinstance(declared, dict):
        raise DeclarationError(f"{DECLARATION_ATTR} = {declared!r}: expected a dict such as "
                               f"{{'causal_alignment': 'bottom_right'}}")
    out = {}
    for key, value in declared.items():
        conv = KNOWN.get(str(key))
        if conv is None:
            raise DeclarationError(f"{DECLARATION_ATTR} names an unknown convention {key!r}; "
                                   f"known: {', '.join(sorted(KNOWN))}")
        if str(value) not in conv.values:
            raise DeclarationError(f"{DECLARATION_ATTR}[{key!r}] = {value!r} is not a value of that "
                                   f"convention; known: {', '.join(conv.values)}")
        out[str(key)] = str(value)
    return out


def dtypes(module: ModuleType) -> tuple[str, ...] | None:
    declared = _get(module, "HARNESS_DTYPES")
    if declared is None:
        return None
    example = "('float16', 'bfloat16')"
    if isinstance(declared, str) or type(declared).__name__ == "dtype":
        raise DeclarationError(f"HARNESS_DTYPES = {declared!r} is a single value where a tuple belongs; "
                               f"write ({str(declared).replace('torch.', '')!r},)")
    if not isinstance(declared, (tuple, list, set, frozenset)):
        raise DeclarationError(f"HARNESS_DTYPES = {declared!r}: expected a tuple of dtype names such as {example}")
    names = tuple(str(d).replace("torch.", "") for d in declared)
    unknown = [n for n in names if n not in DTYPE_NAMES]
    if unknown or not names:
        raise DeclarationError(f"HARNESS_DTYPES = {declared!r}: " + (
            f"unknown dtype(s) {unknown}" if unknown else "empty, so no configuration could be drawn")
            + f"; the suites draw {', '.join(DTYPE_NAMES)}")
    return names


def sizes(module: ModuleType, fields: set[str] | None = None) -> dict[str, range | frozenset] | None:
    """``HARNESS_SIZES`` as field -> range or frozenset of ints (plain data the harness can hold)."""
    declared = _get(module, "HARNESS_SIZES")
    if declared is None:
        return None
    example = "{'E': range(16, 257, 8)}"
    if not isinstance(declared, dict):
        raise DeclarationError(f"HARNESS_SIZES = {declared!r}: expected a dict of config field -> "
                               f"allowed values, e.g. {example}")
    out: dict[str, range | frozenset] = {}
    for key, allowed in declared.items():
        if fields is not None and key not in fields:
            raise DeclarationError(f"HARNESS_SIZES names {key!r}, which no configuration has; "
                                   f"fields: {', '.join(sorted(fields))}")
        if isinstance(allowed, range):
            values: range | frozenset = allowed
        elif isinstance(allowed, (set, frozenset, list, tuple)) and all(
                isinstance(v, int) and not isinstance(v, bool) for v in allowed):
            values = frozenset(allowed)
        else:
            raise DeclarationError(f"HARNESS_SIZES[{key!r}] = {allowed!r}: expected a range or a set "
                                   f"of ints, e.g. {example}")
        if len(values) == 0:
            raise DeclarationError(f"HARNESS_SIZES[{key!r}] = {allowed!r} is empty, so no "
                                   f"configuration could be drawn")
        out[str(key)] = values
    return out


def tiles(module: ModuleType) -> tuple[int, ...] | None:
    """``HARNESS_TILES``: the block sizes of a tiled kernel (``harness.boundary.interpret`` fits the
    tile-boundary regime to them when the kernel runs under Triton's interpreter)."""
    declared = _get(module, "HARNESS_TILES")
    if declared is None:
        return None
    if isinstance(declared, int) and not isinstance(declared, bool):
        raise DeclarationError(f"HARNESS_TILES = {declared!r} is a single value where a tuple belongs; "
                               f"write ({declared},)")
    if not isinstance(declared, (tuple, list)) or not declared or not all(
            isinstance(t, int) and not isinstance(t, bool) and t >= 2 for t in declared):
        raise DeclarationError(f"HARNESS_TILES = {declared!r}: expected a tuple of block sizes (ints >= 2) "
                               f"such as (64,) or (64, 128)")
    return tuple(declared)


#: what a target may declare it does not support (``HARNESS_UNSUPPORTED``): the properties and
#: configurations that need one are reported ``unsupported (declared: ...)``, never as a bug.
#: A protocol name's own features are in its record (``harness.spec.protocol``, ``features=``); here
#: only the ones no single name owns: autocast, a backward pass, a dtype.
FEATURES = {
    **protocol.FEATURES,
    "autocast": "being called inside torch.autocast",
    "backward": "a backward pass (the gradient properties)",
    **{name: f"{name} inputs" for name in DTYPE_NAMES},
}


def unsupported(module: ModuleType) -> frozenset[str]:
    declared = _get(module, "HARNESS_UNSUPPORTED")
    if declared is None:
        return frozenset()
    example = "{'attn_mask', 'dropout'}"
    if isinstance(declared, str) or not isinstance(declared, (tuple, list, set, frozenset)):
        raise DeclarationError(f"HARNESS_UNSUPPORTED = {declared!r}: expected a set of feature names "
                               f"such as {example}")
    names = frozenset(str(d).replace("torch.", "") for d in declared)
    unknown = sorted(names - set(FEATURES))
    if unknown:
        raise DeclarationError(f"HARNESS_UNSUPPORTED names unknown feature(s) {unknown}; known: "
                               f"{', '.join(sorted(FEATURES))}")
    return names


def config_fields() -> set[str] | None:
    """Every field name of the registered configurations (what HARNESS_SIZES may name); None (no
    check) when no suites' folder was registered (``configs.add_source``: every entry point does)."""
    import dataclasses

    import harness.spec.configs as configs

    configs.load_families()  # each registers its configurations
    if not configs.sources():
        return None
    return {f.name for cls in configs._REGISTRY.values() for f in dataclasses.fields(cls)}
