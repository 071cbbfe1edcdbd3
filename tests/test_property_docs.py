"""docs/properties.md is generated from the suites' docstrings (scripts/gen_property_docs.py), so the
catalog cannot drift from the code: it fails here while the page is stale or a property has no
docstring to print."""
from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gen_property_docs", ROOT / "scripts" / "gen_property_docs.py")
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

#: a catalog row shorter than this says too little to be a property's statement
MIN_WORDS = 5


def test_properties_page_is_what_the_generator_writes():
    expected = gen.render()
    actual = gen.PAGE.read_text() if gen.PAGE.exists() else ""
    assert actual == expected, f"docs/properties.md is stale: run {gen.COMMAND} (and commit the page)"


@pytest.mark.parametrize("page", [p.name for p in gen.BLOCK_PAGES])
def test_generated_blocks_are_what_the_generator_writes(page):
    """docs/protocol.md's table of names, docs/running.md's list of what is compared (both from the
    records in harness/spec/protocol.py) and docs/suites.md's covering sets are the generator's."""
    path = next(p for p in gen.BLOCK_PAGES if p.name == page)
    assert path.read_text() == gen.fill(path.read_text()), f"docs/{page} is stale: run {gen.COMMAND}"


def test_a_record_changes_the_protocol_table(monkeypatch):
    """The table is the records': a contract edited in a record is the row's second column."""
    from harness.spec import protocol
    edited = dataclasses.replace(protocol.RECORDS[0], contract="an edited | contract")
    monkeypatch.setattr(protocol, "RECORDS", (edited, *protocol.RECORDS[1:]))
    table = gen.protocol_table()
    assert f"| `{edited.signature}` | an edited \\| contract |" in table
    assert table.splitlines()[2] == "| **Attention** | |"


def test_every_property_has_a_docstring_that_states_it():
    from harness.runner import property_name
    poor = [f"{rel}::{c.__name__} ({property_name(c)})" for _, rel, module in gen.modules()
            for c in gen.checks(module) if len(gen.paragraph(c.__doc__).split()) < MIN_WORDS]
    assert not poor, f"write the docstring (its first paragraph is the catalog row) of: {poor}"


def test_the_generator_finds_a_new_suite_on_its_own(tmp_path, monkeypatch):
    """A suite module added to a family (or a new family) appears without touching the generator."""
    fam = tmp_path / "suites" / "newfam"
    fam.mkdir(parents=True)
    (tmp_path / "suites" / "__init__.py").write_text("")
    (fam / "__init__.py").write_text('"""New family: what it covers."""\n')
    (fam / "test_new.py").write_text('"""A new suite.\n\nMore."""\nPROPERTY_PREFIX = "newfam"\n\n\n'
                                     'def check_thing(target, cfg):\n    """It does | the thing, ``exactly``."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in list(importlib.sys.modules) if m == "suites" or m.startswith("suites.")]:
        monkeypatch.delitem(importlib.sys.modules, name)
    text = gen.render(tmp_path)
    assert "## New family (`suites/newfam/`)\n\nWhat it covers.\n" in text
    assert "### `suites/newfam/test_new.py`\n\nA new suite.\n" in text
    assert "| `newfam.thing` | It does \\| the thing, `exactly`. |" in text
