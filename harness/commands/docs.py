"""``docs``: the documentation pages, wherever the harness is installed.

    python -m harness docs            # the pages and where they are
    python -m harness docs protocol   # print one page (docs/protocol.md)

The README links these pages by relative path; a wheel carries them inside the package
(``harness/docs``), so from an installed harness this command is the way to them.
"""
from __future__ import annotations

import sys

from harness.basics import layout


def add_parser(sub) -> None:
    p = sub.add_parser("docs", help="list the documentation pages, or print one",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("page", nargs="?", default=None, help="a page's name (protocol, properties, running, ci, ...)")
    p.set_defaults(func=main)


def pages() -> dict[str, str]:
    """Each page's name and its first heading."""
    out = {}
    for path in sorted(layout.DOCS.glob("*.md")):
        first = next((line.lstrip("# ").strip() for line in path.read_text().splitlines() if line.startswith("#")), "")
        out[path.stem] = first
    return out


def main(args) -> int:
    found = pages()
    if not found:
        print(f"harness docs: no pages in {layout.DOCS}", file=sys.stderr)
        return 2
    if args.page is None:
        print(f"the harness's documentation pages, in {layout.DOCS}:")
        width = max(map(len, found))
        for name, title in found.items():
            print(f"  {name:<{width}}  {title}")
        print("print one: python -m harness docs NAME")
        return 0
    name = args.page.removesuffix(".md").removeprefix("docs/")
    if name not in found:
        print(f"harness docs: no page {args.page!r}; the pages: {', '.join(found)}", file=sys.stderr)
        return 2
    sys.stdout.write((layout.DOCS / f"{name}.md").read_text())
    return 0
