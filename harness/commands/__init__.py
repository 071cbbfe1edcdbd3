"""One module per CLI command: ``add_parser(subparsers)`` and ``main(args) -> int``."""
