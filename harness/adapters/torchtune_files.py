"""torchtune's module files, imported as torchtune's users import them, or read from the installed
distribution when the package does not import.

torchtune 0.6's package ``__init__`` imports torchao (and fails without it, or against a torchao that
lacks what it expects); its ``modules/position_embeddings.py``, ``rms_norm.py`` and ``layer_norm.py``
need only torch. When the package import fails for that reason, ``load`` executes the one file from
the installed distribution: the same code, without the unrelated imports. ImportError when torchtune
is not installed.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any


def load(module: str, name: str, adapter: str) -> tuple[Any, str]:
    """(``torchtune.<module>.<name>``, where it was read from); ``adapter``: the adapter's module name,
    for the error message."""
    try:
        return getattr(importlib.import_module(f"torchtune.{module}"), name), f"torchtune.{module}"
    except ImportError as exc:
        try:
            spec = importlib.util.find_spec("torchtune")
        except (ImportError, ValueError):  # ValueError: sys.modules["torchtune"] is None
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(f"{adapter} needs torchtune (pip install --no-deps torchtune): {exc}") from exc
        path = os.path.join(list(spec.submodule_search_locations)[0], *module.split(".")) + ".py"
        file_spec = importlib.util.spec_from_file_location(f"_torchtune_{module.replace('.', '_')}", path)
        if file_spec is None or file_spec.loader is None or not os.path.exists(path):
            raise ImportError(f"torchtune is installed but does not import ({exc}) and has no {path}") from exc
        loaded = importlib.util.module_from_spec(file_spec)
        file_spec.loader.exec_module(loaded)
        return getattr(loaded, name), f"{path} (loaded directly: {exc})"
