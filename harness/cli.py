"""``python -m harness <command>``: check, repro, bench, report, run, sweep, migrate, docs.

Each command lives in ``harness/commands/<name>.py`` and provides
``add_parser(subparsers)`` and ``main(args) -> int`` (the exit status).
"""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ["check", "repro", "bench", "report", "run", "sweep", "migrate", "docs"]


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser. Given the command line (``argv``) whose command is known, only that command's
    module is imported (the others are placeholders argparse never dispatches to): ``harness check``
    starts ~0.4 s sooner without ``sweep``'s pandas and ``bench``'s imports (issue 46). Without one
    (``--help``, a typo) every command's module is imported, for the full help and the error."""
    chosen = next((a for a in (argv or []) if not a.startswith("-")), None)
    only = chosen if chosen in COMMANDS else None
    parser = argparse.ArgumentParser(prog="python -m harness",
                                     description="Conformance and benchmark harness for transformer building blocks.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        if only is not None and name != only:
            sub.add_parser(name)  # (not this command line's: never parsed)
            continue
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
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
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
