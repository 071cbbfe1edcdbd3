"""The harness's own optional dependencies: for each module a command imports only when it needs it,
the pip extra of this distribution that installs it (pyproject.toml's ``[project.optional-dependencies]``;
``tests/test_extras.py`` holds the two to each other), and the one line a command says when it is
missing, instead of a traceback::

    harness report: the report's Parquet tables need pyarrow, which is not installed:
    pip install "transformer-conformance-harness[report]" (or leave them out: --formats csv,md)

(``harness.basics.optional`` is the other table: the libraries outside these extras that the adapters, the
controls and CI install.) Checked without importing the module (``importlib.util.find_spec``); an
``ImportError`` already raised is read by ``missing_module`` (its ``name``, or its message, through its
chain: pandas re-raises a missing pyarrow as its own ImportError).
"""
from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass

DISTRIBUTION = "transformer-conformance-harness"


@dataclass(frozen=True)
class Extra:
    module: str      # the import name
    extra: str       # the pip extra that installs it
    package: str     # its distribution's name (pip's)
    used_for: str    # what needs it, for the message ("the report's plots")


EXTRAS: dict[str, Extra] = {e.module: e for e in (
    Extra("pyarrow", "report", "pyarrow", "the report's Parquet tables"),
    Extra("seaborn", "report", "seaborn", "the report's plots"),
    Extra("matplotlib", "report", "matplotlib", "the report's plots"),
    Extra("tqdm", "bench", "tqdm", "the benchmarks' progress bars"),
    Extra("pytest_benchmark", "bench", "pytest-benchmark", "the pytest-benchmark suites (harness.suites.benchmarks)"),
    Extra("pynvml", "bench", "nvidia-ml-py", "the benchmarks' GPU telemetry readings (power, clocks, temperature)"),
    Extra("transformers", "hf", "transformers",
          "the BERT models, the fine-tune, the KV-cache decoders and the Hugging Face adapters"),
    Extra("triton", "triton", "triton", "Triton kernels"),
)}

#: what an ImportError's message says when its ``name`` is not set (pandas' own, a worker's text)
_NAMED = re.compile(r"No module named '([\w.]+)'|import of ([\w.]+) halted|`Import ([\w.]+)` failed|"
                    r"Missing optional dependency '([\w.]+)'")


def install_line(module: str) -> str:
    """``pip install "transformer-conformance-harness[<extra>]"`` for ``module`` (a key of EXTRAS)."""
    return f'pip install "{DISTRIBUTION}[{EXTRAS[module].extra}]"'


def absent(module: str) -> bool:
    """``module`` cannot be imported here (not installed, or hidden: ``sys.modules[module] = None``)."""
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # ValueError: sys.modules[module] is None
        return True


def missing_line(module: str, what: str | None = None) -> str:
    """The one line for a missing ``module``: what needs it, and the install command."""
    e = EXTRAS[module]
    return f"{what or e.used_for} need {e.package}, which is not installed: {install_line(module)}"


def missing_module(exc: BaseException | None) -> str | None:
    """The EXTRAS module whose absence ``exc`` (or an exception in its chain) is about, or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        # (an ImportError's ``name`` is also set for "cannot import name X from M": M is installed)
        name = exc.name if isinstance(exc, ModuleNotFoundError) else None
        names = [name] if name else []
        names += [g for m in _NAMED.finditer(str(exc)) for g in m.groups() if g]
        for n in names:
            top = n.split(".")[0]
            if top in EXTRAS:
                return top
        exc = exc.__cause__ or exc.__context__
    return None


def hint_for(exc: BaseException | None, what: str | None = None) -> str | None:
    """``missing_line`` for the EXTRAS module ``exc`` is about, or None when it is about none."""
    module = missing_module(exc)
    return missing_line(module, what) if module else None


class MissingExtra(ImportError):
    """An optional dependency is missing; the message is the one line to show (``missing_line``)."""


def require(module: str, what: str | None = None) -> None:
    """Raise ``MissingExtra`` with the install line when ``module`` is absent."""
    if absent(module):
        raise MissingExtra(missing_line(module, what), name=module)
