"""A small JSON cache file under the user's cache folder (``$XDG_CACHE_HOME/harness/``, else
``~/.cache/harness/``): read whole (a file that cannot be read, or of another schema, is empty),
written atomically (parallel workers never read half a file), passed over when it cannot be written.
``harness.boundary.interpreter_probe`` keeps its per-triton verdicts here."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "harness"


def read(path: Path, schema: int) -> dict:
    """The file's data when it holds ``schema``, else ``{"schema": schema}``."""
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) and data.get("schema") == schema else {"schema": schema}
    except (OSError, ValueError):
        return {"schema": schema}


def write(path: Path, data: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(scratch, path)
    except OSError:
        pass
