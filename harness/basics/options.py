"""THE shared command-line options of the harness's commands, and their defaults.

``check``, ``repro``, ``bench``, ``run`` and the fine-tune scripts add ``--impl``, ``--isolation``,
``--impl-timeout``, ``--import-timeout`` and ``--device`` (``report`` and ``run`` the gate's
``--strict``) through these functions, so an option is
spelled, typed and defaulted once. The pytest plug-in (``harness.plugin``) reads ``DEFAULT_TARGET``
here too. A leaf module: the CLI builds its parser without importing torch.
"""
from __future__ import annotations

import argparse

import importlib.util
import os
import sys

from harness.basics import layout

#: the project's conformance suites: what ``check`` runs, and the folder whose families'
#: ``configs.py`` define the configuration types (every entry point that loads a target passes it
#: to ``harness.spec.configs.add_source``; the engine itself names no suite)
SUITES = layout.SUITES

#: the built-in reference implementations, the target when no ``--impl`` is given
DEFAULT_TARGET = "reference"
#: ``--isolation``: process = the target in its own worker process; none = in the harness's process
ISOLATION_MODES = ("process", "none")
DEFAULT_ISOLATION = "process"
#: seconds the import of a target in its worker may take (``--import-timeout``; transformers takes seconds)
IMPORT_TIMEOUT_S = 120.0
#: seconds one conformance call into the target may take (``--impl-timeout`` of check and the
#: plug-in); the value the plug-in applies is ``harness.boundary.guard.DEFAULT_TIMEOUT``, which equals it
CALL_TIMEOUT_S = 20.0


def targets(args) -> list[str]:
    """The ``--impl`` specs of a repeatable ``--impl`` (``[DEFAULT_TARGET]`` when none was given)."""
    return list(args.impl or [DEFAULT_TARGET])


def add_impl(p, *, repeatable: bool = False, required: bool = False, help: str | None = None) -> None:
    """``--impl TARGET``: a module path or a .py file. ``repeatable``: a list, read with ``targets(args)``
    (None when not given); else one spec, ``DEFAULT_TARGET`` unless ``required``."""
    if help is None:
        help = "module path or .py file" + ("; repeatable" if repeatable else "") + \
            ("" if required else f" (default: {DEFAULT_TARGET})")
    if repeatable:
        p.add_argument("--impl", action="append", default=None, metavar="TARGET", help=help)
    elif required:
        p.add_argument("--impl", required=True, metavar="TARGET", help=help)
    else:
        p.add_argument("--impl", default=DEFAULT_TARGET, metavar="TARGET", help=help)


def add_isolation(p, help: str) -> None:
    """``--isolation process|none`` (default ``DEFAULT_ISOLATION``); ``help`` says what it isolates."""
    p.add_argument("--isolation", default=DEFAULT_ISOLATION, choices=list(ISOLATION_MODES), help=help)


def add_impl_timeout(p, default: float | None = None, help: str | None = None) -> None:
    """``--impl-timeout SECONDS``: the wall-clock limit of each call into the target (None: the
    harness's default, ``CALL_TIMEOUT_S``)."""
    p.add_argument("--impl-timeout", type=float, default=default, metavar="SECONDS",
                   help=help or f"per-call time limit (default {CALL_TIMEOUT_S:g})")


def add_import_timeout(p, default: float | None = None) -> None:
    """``--import-timeout SECONDS``: the limit on importing the target in its worker (None: the
    worker's default, ``IMPORT_TIMEOUT_S``)."""
    p.add_argument("--import-timeout", type=float, default=default, metavar="SECONDS",
                   help=f"time limit for importing a target in its worker (default {IMPORT_TIMEOUT_S:g})")


#: ``check --jobs``' default where $HARNESS_JOBS is unset: "auto" (``harness.commands.check.jobs``)
DEFAULT_JOBS = "auto"
#: the most workers "auto" starts (each imports torch and runs its own target worker)
MAX_AUTO_JOBS = 8


def add_jobs(p) -> None:
    """``--jobs N|auto``: pytest-xdist workers for one conformance run (default $HARNESS_JOBS, else
    ``DEFAULT_JOBS``)."""
    p.add_argument("--jobs", "-j", default=os.environ.get("HARNESS_JOBS") or DEFAULT_JOBS, metavar="N|auto",
                   help="run the properties in N processes at once (pytest-xdist; each runs its own target "
                        f"worker). auto (the default; $HARNESS_JOBS sets another): the cores this process may "
                        f"use, at most {MAX_AUTO_JOBS}; 1 for a -k slice, with --pdb or on one core. --jobs 1 runs in this one "
                        "process (with --isolation none: for pdb)")


#: pytest options that need the one process (a debugger reads this terminal)
_ONE_PROCESS = ("--pdb", "--trace", "-p no:xdist", "--capture=no", "-s")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not Linux)
        return os.cpu_count() or 1


def jobs(value: str | int | None, pytest_args: list[str] = (), keyword: str | None = None) -> int:
    """The worker count of ``--jobs VALUE``: an integer as given; ``auto``: the cores (at most
    ``MAX_AUTO_JOBS``), 1 where pytest-xdist is missing, ``pytest_args`` ask for the terminal
    (``--pdb``, ``-s``) or their own ``-n``, or the run is a slice (``-k``, test ids: a worker's start-up,
    importing torch and collecting every suite, costs more than a slice's share saves). Raises
    ValueError for anything else, or N > 1 without pytest-xdist."""
    text = str(value if value is not None else 1).strip().lower()
    have_xdist = importlib.util.find_spec("xdist") is not None
    if text == "auto":
        words = [str(w) for w in pytest_args]
        pairs = {" ".join(words[i:i + 2]) for i in range(len(words))}
        own = any(w == "-n" or w.startswith("--numprocesses") for w in words)  # (the user's -n decides)
        if not have_xdist or keyword or own or any("::" in w for w in words) \
                or any(flag in words or flag in pairs for flag in _ONE_PROCESS):
            return 1
        return max(1, min(cores(), MAX_AUTO_JOBS))
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--jobs takes a positive integer or auto, not {value!r}")
    if int(text) > 1 and not have_xdist:
        raise ValueError(f"--jobs {text} runs the properties in pytest-xdist workers, which is not installed here: "
                         f"{sys.executable} -m pip install pytest-xdist (or --jobs 1)")
    return int(text)


def add_device(p, default: str = "cpu", help: str | None = None) -> None:
    """``--device DEVICE`` (a torch device string; ``default`` is the command's)."""
    p.add_argument("--device", default=default, metavar="DEVICE", help=help or f"torch device (default {default})")


def add_triton_interpret(p) -> None:
    """``--triton-interpret``: run Triton targets under Triton's interpreter (``TRITON_INTERPRET=1``,
    ``harness.boundary.interpret``) on any device; on a CPU device they are interpreted without it."""
    p.add_argument("--triton-interpret", action="store_true", default=False,
                   help="run Triton kernels under Triton's interpreter even on a GPU (on a CPU device "
                        "they always are)")


def add_resume_overwrite(p, resume_help: str, overwrite_help: str) -> None:
    """``--resume`` / ``--overwrite``, mutually exclusive: what to do with a run folder that holds
    earlier results (without either, such a folder is refused)."""
    again = p.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help=resume_help)
    again.add_argument("--overwrite", action="store_true", help=overwrite_help)


#: ``--strict`` of the baseline gate (``report`` and ``run``)
STRICT_GATE_HELP = ("the baseline gate also fails (exit 1) on a point it could not decide: "
                    "\"undecided (spread X %%)\" (too noisy to detect the gate's stated slowdown) or "
                    "\"undecided (below resolution)\" (CPU peak memory under the probe's resolution, "
                    "a baseline of 0 bytes); without it they are counted and shown, not failed")


def add_strict_gate(p, help: str = STRICT_GATE_HELP) -> None:
    """``--strict``: the baseline gate fails on undecided points too (``reports.gate.gate``)."""
    p.add_argument("--strict", action="store_true", help=help)


def shard(text: str) -> tuple[int, int]:
    """``K/N`` (1 <= K <= N) as (K, N): the K-th of N parts of a command's work (a CI matrix job)."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes K/N (the K-th of N parts, 1 <= K <= N), got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"--shard {text}: K must be 1 .. N")
    return k, n


def in_shard(items: list, part: tuple[int, int] | None) -> list:
    """The items of shard ``part`` = (K, N): every N-th, from the K-th, in the given order (a deterministic
    split: the same plan gives every shard a disjoint part, and the N parts are the whole)."""
    if part is None:
        return list(items)
    k, n = part
    return [x for i, x in enumerate(items) if i % n == k - 1]
