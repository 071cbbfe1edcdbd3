"""``--shard K/N`` for a pytest session of the suites (``harness check --shard``, issue 49): the K-th of
N parts of the collected properties, for the jobs of a CI matrix.

Every job collects the same tests in the same order (the same checkout, targets and options) and keeps
every N-th property from the K-th (``options.in_shard`` over the test functions in collection order, each
with all its targets: a property's cells, and a consistency check's targets, stay in one job): the parts
are disjoint and together the whole run. The rest are deselected (pytest reports them so). Under pytest-xdist each worker collects and deselects
alike, as xdist requires. ``harness check --merge`` joins the jobs' reports (``conformance_table.merge``).
"""
from __future__ import annotations

from harness.basics import options


class Shard:
    """The pytest plug-in object of one shard (registered by ``harness.plugin`` when --shard is given)."""

    def __init__(self, part: tuple[int, int]):
        self.part = part

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        def test_of(item) -> str:
            return item.nodeid.split("[", 1)[0]  # (the test function: its targets are its parameters)

        mine = set(options.in_shard(list(dict.fromkeys(test_of(i) for i in items)), self.part))
        dropped = [i for i in items if test_of(i) not in mine]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if test_of(i) in mine]

    def pytest_report_header(self, config) -> str:
        k, n = self.part
        return f"shard {k}/{n}: every {n}th collected property from the {k}th (harness check --merge joins the shards)"
