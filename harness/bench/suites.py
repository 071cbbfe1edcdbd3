"""THE registry of benchmark suites: each suite's name and module, and the named sets of them.

Every place that lists suites reads it: ``bench --suite`` (its default, ``all``, the check of a
name, the order under a time budget), ``run --suite``, the worker's preload
(``harness.bench.on_target.prepare_process``) and ``harness migrate`` (harness/commands/migrate.py). A suite
module defines ``points(ctx) -> list[Point]`` and ``summary(ctx, rows) -> list[Check]``.
"""
from __future__ import annotations

import importlib

#: suite name -> its module
MODULES = {
    "scaling": "harness.bench.scaling",
    "receptive_field": "harness.bench.receptive_field",
    "kv_cache": "harness.bench.kv_cache",
    "packing": "harness.bench.packing",     # packed (attention_varlen) vs padded tokens/s; opt-in
    "timer_selfcheck": "harness.bench.timer_selfcheck",
    "finetune": "harness.bench.finetune",   # BERT fine-tuning (its own module and profiles)
    "conformance_time": "harness.bench.conformance_time",
}
#: what ``bench`` and ``run`` measure without ``--suite``
DEFAULT = ("scaling", "receptive_field", "kv_cache")
#: what ``--suite all`` runs (finetune needs its data and minutes of training: name it)
ALL = ("scaling", "receptive_field", "kv_cache", "timer_selfcheck")
#: open-ended suites: run last under a time budget, so a budget hit costs their largest sizes
OPEN_ENDED = ("scaling", "finetune")


def parse(text: str) -> list[str]:
    """The suite names of a ``--suite`` value (comma-separated, or ``all``); SystemExit on an unknown one."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == ["all"]:
        return list(ALL)
    unknown = [s for s in names if s not in MODULES]
    if unknown:
        raise SystemExit(f"unknown suite(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    return names


def module(name: str):
    """The imported module of suite ``name`` (KeyError for an unknown one)."""
    return importlib.import_module(MODULES[name])
