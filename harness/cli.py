"""``python -m harness <command>``: check, repro, bench, report, run, sweep, migrate, docs.

Each command lives in ``harness/commands/<name>.py`` and provides
``add_parser(subparsers)`` and ``main(args) -> int`` (the exit status).
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ["check", "repro", "bench", "report", "run", "sweep", "migrate", "docs"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness",
                                     description="Conformance and benchmark harness for transformer building blocks.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"harness.commands.{name}")
        except ImportError as exc:  # an optional dependency of one command is missing
            p = sub.add_parser(name, help=f"(unavailable: {exc})")
            p.set_defaults(func=lambda args, exc=exc: _unavailable(exc))
            continue
        module.add_parser(sub)
    return parser


def _unavailable(exc: Exception) -> int:
    from harness.basics import extras
    print(extras.hint_for(exc) or f"this command needs a package that is not installed: {exc}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ImportError as exc:  # an optional dependency (an extra of the harness): one line, no traceback
        from harness.basics import extras
        hint = extras.hint_for(exc)
        if hint is None:
            raise
        print(f"harness {args.command}: {hint}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
