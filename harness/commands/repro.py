"""``repro``: replay one property on one configuration, outside Hypothesis.

    python -m harness repro suites/attention/test_attention.py::check_causal --impl my_attn.py --config '{...}'

This is the one-line repro every failure message prints.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from pathlib import Path

from hypothesis.errors import UnsatisfiedAssumption

from harness import configs, options


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
    path, _, name = ref.partition("::")
    if not name:
        raise SystemExit(f"expected path/to/suite.py::check_name, got {ref!r}")
    root = Path(__file__).resolve().parents[2]
    file = Path(path)
    if not file.exists() and (root / path).exists():  # a repro line pasted in another folder
        file = root / path
    if not file.exists():
        raise SystemExit(f"no suite file {path!r}: looked in {Path.cwd()} and in the harness's {root}")
    file = file.resolve()
    try:  # the project's own suites import as a package (they import each other)
        module_name = ".".join(file.relative_to(root).with_suffix("").parts)
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        module = importlib.import_module(module_name)
    except ValueError:
        spec = importlib.util.spec_from_file_location(file.stem, file)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return getattr(module, name)


def main(args) -> int:
    from harness import conventions, runner
    from harness.loader import load_target
    from harness.target_import import Missing

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
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        return 2
    finally:
        target.close()
    labels = target.outcome.labels
    print("PASSED" + (f" ({labels[-1]})" if labels else ""))
    return 0
