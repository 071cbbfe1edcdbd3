"""The covering sets of the options drawn together (issue 43, ``suites/pairwise.py``): every pair
of option values of each name meets in at least one row, the sets stay small, every parameter and
feature of a name joins its factors (or is named as not drawn, with a reason), and docs/suites.md
shows exactly the sets the suites run. The planted two-option bugs are tests/test_planted_pairwise.py's."""
from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from harness.spec.protocol import RECORDS
from harness.suites import pairwise

RECORD = {r.name: r for r in RECORDS}
OPTIONS = pairwise.all_options()
IDS = [o.protocol_name for o, _ in OPTIONS]


@pytest.mark.parametrize("opts,prop", OPTIONS, ids=IDS)
def test_every_pair_of_values_meets_in_a_row(opts, prop):
    rows = pairwise.covering_rows(opts)
    names = [f.name for f in opts.factors]
    covered = set().union(*(pairwise.pairs_of(r, names) for r in rows))
    assert pairwise.required_pairs(opts) <= covered
    assert all(opts.allowed(r) for r in rows), "a row holds a forbidden pair"
    assert all(r[f.name] in f.values for r in rows for f in opts.factors)
    # small: at most 3x the largest product of two factors' values (a lower bound of any covering set)
    bound = max(len(a.values) * len(b.values) for a, b in itertools.combinations(opts.factors, 2))
    assert bound <= len(rows) <= 3 * bound, (len(rows), bound)


@pytest.mark.parametrize("opts,prop", OPTIONS, ids=IDS)
def test_the_rows_build_distinct_configurations_that_round_trip(opts, prop):
    """Each row is a configuration a repro line replays (JSON round trip), none twice."""
    from harness.spec.configs import Config
    built = [opts.build(r) for r in pairwise.covering_rows(opts)]
    assert len(set(built)) == len(built)
    assert all(Config.from_json(c.to_json()) == c for c in built)


@pytest.mark.parametrize("opts,prop", OPTIONS, ids=IDS)
def test_every_option_of_the_name_joins_its_covering_set(opts, prop):
    assert pairwise.missing_options(opts, RECORD[opts.protocol_name]) == []


def test_a_new_option_without_a_factor_fails():
    """A parameter (and a feature) added to a name's record, and to no factor, is reported."""
    opts, _ = OPTIONS[0]
    record = RECORD[opts.protocol_name]
    grown = replace(record, signature=record.signature.replace(")", ", logit_cap=None)", 1),
                    features={**record.features, "logit_cap": "a new knob"})
    assert pairwise.missing_options(opts, grown) == ["logit_cap", "logit_cap"]


def test_a_missed_pair_is_found():
    """The check above can fail: a row dropped from a covering set leaves pairs uncovered."""
    opts, _ = OPTIONS[-1]
    rows = pairwise.covering_rows(opts)[:-1]  # (the last row covered a pair no earlier one did)
    names = [f.name for f in opts.factors]
    covered = set().union(*(pairwise.pairs_of(r, names) for r in rows))
    assert pairwise.required_pairs(opts) - covered


def test_forbidden_pairs_are_left_out_and_a_dead_end_is_an_error():
    f = (pairwise.Factor("a", (1, 2), ("x",)), pairwise.Factor("b", (1, 2), ("y",)), pairwise.Factor("c", (1,), ("z",)))
    opts = pairwise.Options("n", f, build=dict, forbidden=((((("a", 1), ("b", 2))), "why"),))
    rows = pairwise.covering_rows(opts)
    assert not any(r["a"] == 1 and r["b"] == 2 for r in rows) and len(rows) == 3
    dead = pairwise.Options("n", f, build=dict, forbidden=((((("a", 1), ("c", 1))), "why"),))
    with pytest.raises(ValueError, match="no value of 'c'"):
        pairwise.covering_rows(dead)


def test_docs_show_the_covering_sets():
    from pathlib import Path
    page = (Path(__file__).resolve().parents[1] / "docs" / "suites.md").read_text()
    assert pairwise.DOCS_BEGIN in page, "docs/suites.md lacks the generated block of the covering sets"
    block = pairwise.DOCS_BEGIN + page.split(pairwise.DOCS_BEGIN, 1)[1].split(pairwise.DOCS_END, 1)[0] + \
        pairwise.DOCS_END
    assert block == pairwise.render_docs(), "docs/suites.md is stale: run python scripts/gen_property_docs.py"


def test_a_declared_unsupported_option_is_left_out_not_the_row():
    """``pairwise.project``: a target without paged caches gets the row's other options together."""
    from types import SimpleNamespace

    from harness.suites.kvcache.test_kvcache_pairwise import COVERING, DROPS
    paged = next(c for c in COVERING if c.block_size and c.rotary_dim and c.hq != c.hkv)
    target = SimpleNamespace(info=SimpleNamespace(unsupported=frozenset({"kvcache_paged", "enable_gqa"}), lacking={}))
    out = pairwise.project(target, paged, DROPS)
    assert (out.block_size, out.spare, out.hq) == (0, 0, paged.hkv)
    assert (out.rotary_dim, out.window, out.dtype) == (paged.rotary_dim, paged.window, paged.dtype)
    assert pairwise.project(SimpleNamespace(info=SimpleNamespace(unsupported=frozenset(), lacking={})),
                            paged, DROPS) is paged
