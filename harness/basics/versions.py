"""The version a report prints for a target that states none (no ``__version__`` / ``VERSION``).

``describe(spec, file)``: the version of the installed distribution that provides the spec's
top-level package (``reference`` -> this project's), else ``git describe`` of the checkout that
holds the target's file (``git f7b0d0c-dirty``), else None: the header and conformance.md then say
nothing about a version. Read in the harness's process from the spec and the file path only (the
target is never imported here); cached per process.
"""
from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess

#: seconds ``git describe`` may take before the version is left out
GIT_TIMEOUT_S = 5


@functools.lru_cache(maxsize=1)
def _distributions() -> dict[str, list[str]]:
    try:
        return importlib.metadata.packages_distributions()
    except Exception:  # noqa: BLE001 - broken metadata of some installed package: no version
        return {}


def from_metadata(spec: str) -> str | None:
    """The version of the distribution that installs ``spec``'s top-level package (a dotted module
    path; a file path has none)."""
    spec = str(spec)
    if spec.endswith(".py") or "/" in spec or os.sep in spec:
        return None
    for dist in _distributions().get(spec.split(".")[0], []):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@functools.lru_cache(maxsize=64)
def from_git(folder: str) -> str | None:
    """``git describe --tags --always --dirty`` in ``folder`` (None outside a checkout or without git)."""
    if not folder or not os.path.isdir(folder):
        return None
    try:
        out = subprocess.run(["git", "-C", folder, "describe", "--tags", "--always", "--dirty"],
                             capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text if out.returncode == 0 and text else None


def describe(spec: str, file: str | None) -> str | None:
    """``version 0.1.0`` (package metadata) or ``git <describe>``; None when neither is known."""
    if version := from_metadata(spec):
        return f"version {version}"
    if file and os.path.isabs(str(file)) and (found := from_git(os.path.dirname(str(file)))):
        return f"git {found}"
    return None


def label(target) -> str:
    """`` (version V)`` for a target's line: its own version, else ``describe``'s, else nothing."""
    own = getattr(target, "version", None)
    if own:
        return f" (version {own})"
    found = describe(getattr(target, "spec", ""), getattr(target, "file", None))
    return f" ({found})" if found else ""
