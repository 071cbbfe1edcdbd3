"""The planted Triton bugs: a reference Triton kernel (``reference/triton/<name>.py``) with one edit.

``mutant(name, old, new)`` replaces the exact text ``old`` (it must occur ``count`` times) by
``new`` in the kernel's source and imports the result from a file (``triton.jit`` reads a
kernel's source from its file), so each planted file states its bug as a one-line diff of the
correct kernel and follows the kernel as it changes. The files go to a per-content name in the
temporary folder; the module exports the kernel's ``HARNESS_*`` declarations too.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[3] / "reference" / "triton"
DECLARATIONS = ("HARNESS_TILES", "HARNESS_CONVENTIONS", "HARNESS_UNSUPPORTED", "HARNESS_SIZES", "HARNESS_DTYPES")


def mutant(name: str, old: str, new: str, count: int = 1, also: tuple[tuple[str, str], ...] = ()):
    """``also``: further (old, new) edits of the same bug, each occurring once (a host-side change
    with its kernel-side twin)."""
    text = (KERNELS / f"{name}.py").read_text()
    for o, n, c in ((old, new, count), *((a, b, 1) for a, b in also)):
        found = text.count(o)
        if found != c:
            raise RuntimeError(f"planted bug out of date: {o!r} occurs {found} times in "
                               f"reference/triton/{name}.py, expected {c}")
        text = text.replace(o, n)
    digest = hashlib.sha1(text.encode()).hexdigest()[:12]
    folder = Path(tempfile.gettempdir()) / "harness-triton-mutants"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}_{digest}.py"
    if not path.exists():
        scratch = folder / f".{path.name}.{os.getpid()}"
        scratch.write_text(text)
        os.replace(scratch, path)  # atomic: parallel workers never read half a file
    module_name = f"harness_triton_mutant_{name}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def export(module, namespace: dict, *names: str) -> None:
    """Put ``names`` and the kernel's declarations into a planted file's ``namespace``."""
    for n in (*names, *DECLARATIONS):
        if hasattr(module, n):
            namespace[n] = getattr(module, n)
