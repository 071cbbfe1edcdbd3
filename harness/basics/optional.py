"""THE table of the optional libraries: what README command 1 (torch, ``pip install -e ".[test]"``,
the fine-tune's data) does not install, and CI (``.ci/setup.sh``) adds for the adapter, control and
Triton checks. One entry per import name: the install command, pinned at the version CI last passed
with (``.ci/constraints.txt``; ``--no-deps`` where ``.ci/setup.sh`` installs it so), the modules it
imports that its install may not bring (``needs``), and the variable that makes its absence an error
rather than a skip (besides ``$HARNESS_REQUIRE_OPTIONAL``, which covers every entry; CI sets both).

Read by ``harness.controls`` (a control's ``library``), ``harness.boundary.interpret`` (Triton's install
line) and the self-tests: ``@pytest.mark.optional_libs("x_transformers", ...)`` (tests/conftest.py)
skips a test with the install command where a library is missing, and fails it under the variable;
``tests/test_optional_libs.py`` checks that every test that needs one says so, and that these pins
are CI's. Checked without importing the library (``harness.basics.extras.absent``). (``harness.basics.extras`` is the
other table: the harness's own optional dependencies, each installed by a pip extra of this package.)
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from harness.basics.extras import absent

#: set (CI: .ci/setup.sh): a missing optional library fails the tests that need it instead of skipping them
REQUIRE_ALL = "HARNESS_REQUIRE_OPTIONAL"


@dataclass(frozen=True)
class Library:
    module: str                 # the import name
    install: str                # the pinned install command (CI's version)
    needs: tuple[str, ...] = ()  # other import names it needs that its install leaves out (--no-deps)
    require: str | None = None  # its own HARNESS_REQUIRE_* variable, if it has one besides REQUIRE_ALL
    package: str | None = None  # its distribution's name where it differs from the import name


_TRITON = "HARNESS_REQUIRE_TRITON"

LIBRARIES: dict[str, Library] = {lib.module: lib for lib in (
    Library("x_transformers", "pip install x-transformers==2.31.10"),
    # what x-transformers brings, and what rotary-embedding-torch and the side-by-side releases import
    Library("einops", "pip install einops==0.8.2"),
    # --no-deps: its own requirements pull datasets/torchao; the adapter reads its position embeddings only
    Library("torchtune", "pip install --no-deps torchtune==0.6.1"),
    Library("rotary_embedding_torch", "pip install --no-deps rotary-embedding-torch==0.9.1 einops==0.8.2",
            needs=("einops",)),
    # flash-linear-attention's kernels (--no-deps: its cuda/cpu extras pull torch)
    Library("fla", "pip install --no-deps fla-core==0.6.0 einops==0.8.2 triton==3.9.0", needs=("einops", "triton"),
            require=_TRITON, package="fla-core"),
    # xformers' attention-bias classes (--no-deps: its requirement pulls a CUDA torch)
    Library("xformers", "pip install --no-deps xformers==0.0.35"),
    # the ONNX standard's reference evaluator (NumPy; brings protobuf and ml-dtypes)
    Library("onnx", "pip install onnx==1.23.2"),
    # onnxruntime's CPU kernels (its adapters build their one-node models with onnx)
    Library("onnxruntime", "pip install onnxruntime==1.32.0 onnx==1.23.2", needs=("onnx",)),
    # (the line a Triton target without triton is told, also docs/running.md's)
    Library("triton", "python -m pip install 'triton==3.9.0'", require=_TRITON),
    # --no-deps: its own requirements pull a CUDA torch
    Library("liger_kernel", "pip install --no-deps liger-kernel==0.8.5 triton==3.9.0", needs=("triton",),
            require=_TRITON),
)}


def install(module: str) -> str:
    return LIBRARIES[module].install


def library(module: str) -> tuple[str, str]:
    """``(import name, install command)``: a control's ``library`` (harness.controls)."""
    return module, LIBRARIES[module].install


def missing(module: str) -> str | None:
    """Why ``module`` (a key of LIBRARIES) cannot be imported here, with its install command; or None."""
    lib = LIBRARIES[module]
    needed = [m for m in lib.needs if absent(m)]
    if absent(lib.module):
        also = f" (nor {', '.join(needed)}, which it needs)" if needed else ""
        return f"optional library {lib.module} is not installed{also}: {lib.install}"
    if needed:
        return f"optional library {lib.module} needs {', '.join(needed)}, which is not installed: {lib.install}"
    return None


def required(module: str) -> str | None:
    """The set variable that makes ``module``'s absence an error (``$HARNESS_REQUIRE_TRITON``,
    ``$HARNESS_REQUIRE_OPTIONAL``), or None."""
    lib = LIBRARIES[module]
    return next((v for v in (lib.require, REQUIRE_ALL) if v and os.environ.get(v)), None)
