"""``repro``: replay one property on one configuration, outside Hypothesis.

    python -m harness repro harness.suites.attention.test_attention_masks::check_causal --impl my_attn.py --config '{...}'

This is the one-line repro every failure message prints.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import traceback
from pathlib import Path

import pytest
from hypothesis.errors import UnsatisfiedAssumption

from harness.basics import layout, options
from harness.spec import configs


def add_parser(sub) -> None:
    p = sub.add_parser("repro", help="replay one property check on one configuration")
    p.add_argument("check", help="path/to/suite.py::check_name")
    options.add_impl(p, required=True)
    p.add_argument("--config", required=True, help="the JSON configuration from the failure message")
    p.add_argument("--convention", action="append", default=[], metavar="KEY=VALUE")
    options.add_device(p)
    options.add_isolation(p, "process (default): the target in its own worker process, as the suites ran it")
    options.add_impl_timeout(p)
    p.set_defaults(func=main)


def load_check(ref: str):
    """The check a repro line names: ``harness.suites.<family>.<suite>::check_name`` (the form the
    suites print: it names the harness's own suites wherever they are installed), or
    ``path/to/suite.py::check_name`` (a suite file of one's own; an older line's
    ``suites/<family>/<suite>.py`` is the harness's when no such file is in this folder)."""
    where, _, name = ref.partition("::")
    if not name:
        raise SystemExit(f"expected harness.suites.<family>.<suite>::check_name or path/to/suite.py::check_name, "
                         f"got {ref!r}")
    if not where.endswith(".py") and "/" not in where and os.sep not in where:
        module_name = where
    else:
        file = Path(where)
        if not file.exists() and where.startswith("suites/") and (layout.SUITES.parent / where).exists():
            file = layout.SUITES.parent / where  # an older repro line: the harness's own suites
        if not file.exists():
            raise SystemExit(f"no suite file {where!r} in {Path.cwd()}")
        module_name = layout.suite_module(file)
    if module_name is None:  # a suite file of one's own, outside the harness's suites
        spec = importlib.util.spec_from_file_location(file.stem, file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise SystemExit(f"no suite module {module_name!r}: {exc}") from None
    try:
        return getattr(module, name)
    except AttributeError:
        raise SystemExit(f"suite {module_name or where!r} has no check {name!r}") from None


def main(args) -> int:
    from harness import runner
    from harness.spec import conventions
    from harness.boundary.loader import load_target
    from harness.boundary.target_import import BrokenTarget, Missing

    configs.add_source(options.SUITES)  # the configuration types: HARNESS_SIZES, --config
    target = load_target(args.impl, cli_conventions=conventions.parse_cli(args.convention), device=args.device,
                         isolation=args.isolation, timeout=args.impl_timeout, threads=1)
    if target.load_error:
        print(f"target {target.spec!r} does not load: {target.load_error}")
        return 2
    check = load_check(args.check)
    cfg = configs.Config.from_json(args.config)
    print(f"replaying {runner.property_name(check)} on {target.spec} with {cfg}")
    try:
        runner.run(target, check, cfg)
    except Missing as exc:
        print(f"SKIPPED: {exc}")
        return 0
    except pytest.skip.Exception as exc:  # (an optional dependency of the check is not installed)
        print(f"SKIPPED: {exc.msg}")
        return 0
    except runner.ConfigUnsupported as exc:
        print(f"UNSUPPORTED: {exc.reason}")
        return 0
    except UnsatisfiedAssumption:
        print(f"SKIPPED: {target.spec} declares HARNESS_DTYPES = {target.dtypes}, "
              f"HARNESS_SIZES = {target.sizes}")
        return 0
    except runner.PropertyFailure as exc:
        print(f"FAILED\n{exc}")
        return 1
    except BrokenTarget as exc:  # a wrong signature: a failure of the target, as in the suites
        print(f"FAILED\n{exc}")
        return 1
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 2
    finally:
        target.close()
    labels = target.outcome.labels
    print("PASSED" + (f" ({labels[-1]})" if labels else ""))
    return 0
