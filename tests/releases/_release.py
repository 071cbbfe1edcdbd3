"""Load an adapter over one release of a library installed side by side with ``pip install
--target $HARNESS_LIBS/<folder> --no-deps <package>==<version>`` (HARNESS_LIBS: default /tmp/libs).
A target module calls ``load`` and exports what it returns; it runs in the target's own worker
process, so releases of one package never meet in one interpreter."""
from __future__ import annotations

import importlib
import os
import sys
from importlib import metadata
from pathlib import Path


def libs_dir() -> Path:
    return Path(os.environ.get("HARNESS_LIBS", "/tmp/libs"))


def load(package: str, version: str, folder: str, adapter: str) -> dict:
    """The adapter's public names, imported with ``libs_dir() / folder`` first on sys.path;
    ImportError unless that folder holds ``package`` at exactly ``version``."""
    where = libs_dir() / folder
    if not where.is_dir():
        raise ImportError(f"{package} {version} is not installed side by side: no {where} "
                          f"(pip install --target {where} --no-deps {package}=={version})")
    top = package.replace("-", "_")
    loaded = sys.modules.get(top)
    if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(str(where)):
        raise ImportError(f"another {package} is already imported here ({loaded.__file__}): releases side by "
                          f"side need a process each (the default --isolation process)")
    sys.path.insert(0, str(where))
    found = metadata.version(package)
    if found != version:
        raise ImportError(f"{where} holds {package} {found}, expected {version}")
    module = importlib.import_module(adapter)
    return {k: v for k, v in vars(module).items() if not k.startswith("_") or k == "__version__"}
