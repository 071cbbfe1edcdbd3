"""Old library releases installed side by side, for adapters that hold one release to the protocol.

    pip install --target /tmp/libs/NAME-VERSION --no-deps PACKAGE==VERSION

(``$HARNESS_LIBS`` replaces ``/tmp/libs``.) An installed package keeps its one version; a release
folder lets a target wrap x-transformers 1.0.1 next to the 2.x the environment has. Two ways:

- ``import_release``: the release folder first on ``sys.path``, then an adapter module imported over
  it (rotary-embedding-torch 0.2.6 ... 0.8.3). It runs in the target's own worker process, so
  releases of one package never meet in one interpreter.
- ``load_definitions``: nothing put on ``sys.path``; the named top-level definitions of one of the
  release's source files (its own code, unchanged) are executed in a namespace of the modules
  they use, so a release whose package ``__init__`` imports what is not installed
  (x-transformers 1.0.x: entmax) can still be wrapped, and the installed version stays the one
  ``import`` sees.

A release installed with ``--no-deps`` still imports its own requirements from the environment
(``NEEDS``): ``missing`` and ``import_needed`` name the one absent with its install command.
"""
from __future__ import annotations

import ast
import importlib
import os
import sys
from importlib import metadata, util
from pathlib import Path

#: what a release's code imports beyond torch (the environment provides it: a release folder is
#: installed with --no-deps): package -> module names, each installed as ``pip install <module>``
NEEDS = {"x-transformers": ("einops",), "rotary-embedding-torch": ("einops",)}


def release_dir(folder: str) -> Path:
    """``$HARNESS_LIBS/folder`` (default ``/tmp/libs/folder``), whether or not it exists."""
    return Path(os.environ.get("HARNESS_LIBS", "/tmp/libs")) / folder


def install_command(folder: str, package: str, version: str) -> str:
    return f"pip install --target {release_dir(folder)} --no-deps {package}=={version}"


def installed_versions(folder: str, package: str) -> list[str]:
    """The versions of ``package`` whose ``.dist-info`` the release folder holds (importing nothing)."""
    return [d.name.split("-")[1].removesuffix(".dist")
            for d in release_dir(folder).glob(f"{package.replace('-', '_')}-*.dist-info")]


def missing(folder: str, package: str, version: str) -> str | None:
    """Why ``release_dir(folder)`` does not hold ``package`` at ``version``, or why it cannot run
    here (a module of ``NEEDS`` not installed), with the install command; or None. Read from its
    ``.dist-info`` and the environment's import paths, importing nothing."""
    if version not in installed_versions(folder, package):
        return (f"{package} {version} is not installed side by side at {release_dir(folder)} "
                f"({install_command(folder, package, version)})")
    for module in NEEDS.get(package, ()):
        if util.find_spec(module) is None:
            return f"{package} {version} needs {module}, which is not installed (pip install {module})"
    return None


def import_needed(module: str, who: str):
    """``import module``; ImportError naming ``who`` needs it and its install command when absent."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{who} needs {module} (pip install {module}): {exc}") from exc


def require(folder: str, package: str, version: str, relpath: str) -> Path:
    """The release's source file ``relpath``; ImportError with the install command if missing or
    if the folder holds another version."""
    root = release_dir(folder)
    path = root / relpath
    install = install_command(folder, package, version)
    if not path.is_file():
        raise ImportError(f"{package} {version} is not installed side by side at {root} ({install})")
    found = installed_versions(folder, package)
    if found and version not in found:
        raise ImportError(f"{root} holds {package} {found}, not {version} ({install})")
    return path


def load_definitions(path: Path, names: tuple[str, ...], namespace: dict) -> dict:
    """Execute the top-level ``def``/``class`` statements called ``names`` from ``path`` (in source
    order) in ``namespace``; returns the namespace. ImportError if one is absent."""
    tree = ast.parse(path.read_text(), filename=str(path))
    wanted = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    missing = set(names) - {n.name for n in wanted}
    if missing:
        raise ImportError(f"{path} defines no {sorted(missing)}")
    code = compile(ast.Module(body=wanted, type_ignores=[]), str(path), "exec")
    exec(code, namespace)  # noqa: S102 - the release's own source, unchanged
    return namespace


def import_release(package: str, version: str, folder: str, adapter: str) -> dict:
    """The public names of the module ``adapter``, imported with ``release_dir(folder)`` first on
    sys.path; ImportError (with the install command) unless that folder holds ``package`` at
    exactly ``version``, or when another copy of the package is imported in this process."""
    where = release_dir(folder)
    if not where.is_dir():
        raise ImportError(f"{package} {version} is not installed side by side: no {where} "
                          f"({install_command(folder, package, version)})")
    loaded = sys.modules.get(package.replace("-", "_"))
    if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(str(where)):
        raise ImportError(f"another {package} is already imported here ({loaded.__file__}): releases side by "
                          f"side need a process each (the default --isolation process)")
    sys.path.insert(0, str(where))
    found = metadata.version(package)
    if found != version:
        raise ImportError(f"{where} holds {package} {found}, expected {version}")
    module = importlib.import_module(adapter)
    return {k: v for k, v in vars(module).items() if not k.startswith("_") or k == "__version__"}
