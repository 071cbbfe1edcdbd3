"""Where the harness's own folders are, in a checkout and in an installed wheel, and their names.

The repository keeps ``suites/``, ``reference/`` and ``reports/`` at its top level (the layout a
contributor reads); the wheel installs them *inside* the ``harness`` package (``setup.py`` maps
them). Either way they are imported as ``harness.suites``, ``harness.reference`` and
``harness.reports``: an installed harness claims no generic top-level name, so a user's own
``suites/`` package, ``reports/`` package or ``reference.py`` is never shadowed or hijacked.

A leaf module (standard library only): ``harness/__init__.py`` reads it before anything else.
"""
from __future__ import annotations

from pathlib import Path

#: the repository folders that are subpackages of ``harness`` in the wheel
MAPPED = ("suites", "reference", "reports")

HERE = Path(__file__).resolve().parents[1]  # (the harness package: this module is harness/basics/layout.py)
#: True in an installed wheel (the mapped folders are inside the package)
INSTALLED = (HERE / "suites").is_dir()
#: the checkout's top level (None in a wheel)
CHECKOUT = None if INSTALLED else HERE.parent


def folder(name: str) -> Path:
    """The folder of a mapped package (``suites``, ``reference``, ``reports``) or of a data folder
    the wheel carries inside ``harness/`` (``docs``)."""
    return HERE / name if INSTALLED else HERE.parent / name


#: the conformance suites (one sub-folder per component family)
SUITES = folder("suites")
#: the stored benchmark baselines, found by name: ``--baseline cpu-reference``
BASELINES = folder("reports") / "baselines"
#: the documentation pages the README links (installed with the wheel too)
DOCS = folder("docs")

def suite_module(file: Path) -> str | None:
    """The dotted name of one of the harness's own suite files (``harness.suites.<family>.<suite>``,
    in a checkout or an installed wheel alike), or None for a file outside them."""
    try:
        rel = Path(file).resolve().relative_to(SUITES.resolve())
    except ValueError:
        return None
    return ".".join(("harness", "suites", *rel.with_suffix("").parts))


#: the built-in target names a user passes as ``--impl``: ``reference`` (and its submodules,
#: ``reference.triton.norms``) are the harness's own ``harness.reference``
BUILTIN_TARGETS = ("reference",)


def builtin_module(spec: str) -> str | None:
    """The module a built-in ``--impl`` name stands for (``reference.triton.rope`` ->
    ``harness.reference.triton.rope``), or None for any other spec. A user's own file of that name
    is passed by its path (``--impl ./reference.py``)."""
    head = spec.split(".")[0]
    return f"harness.{spec}" if head in BUILTIN_TARGETS and "/" not in spec and not spec.endswith(".py") else None
