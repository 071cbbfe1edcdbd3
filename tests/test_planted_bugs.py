"""Every planted bug is caught by the property its own file names (issue 45: a planted bug is one file).

Each ``tests/planted/<family>/<bug>.py`` that plants a bug says in its docstring what catches it
(``Caught by: <property>``) and what the failure must say (``Message:`` lines); ``tests/planted_index.py``
reads them and finds the suite test of the property. Each case runs ONE suite test in-process under
the derandomized ``ci`` profile: the failure names the property, carries a repro line naming the
target, says each message and none of the ``Absent:`` phrases. Rules by kind of property, not by bug:

- a history property (``suites/test_history.py``) is shrunk to a history of at least two calls (each
  call alone is right on every planted target);
- a state machine's ``call_sequences`` is shrunk to at least two calls; the first bug of each such
  suite (by file name) has its printed repro line replayed: it fails at the same call, and the same
  sequence passes on its folder's correct ``_base.py``.

Triton's planted kernels are run by ``tests/test_planted_triton.py`` (the interpreter's tiers), from
the same descriptions. Controls, declared conventions and library releases stay in the family files.
"""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import planted_index
from harness.cli import main as cli_main
from planted_support import ROOT, assert_call_program, assert_caught, history_of

BUGS = [b for b in planted_index.planted() if b.family != "triton"]

#: the first bug of each state-machine suite, whose repro line is replayed (the path is the same for all)
REPLAYED = {min((b for b in BUGS if b.test == "test_call_sequences" and b.suite == s), key=lambda b: b.path.name)
            for s in {b.suite for b in BUGS if b.test == "test_call_sequences"}}

#: properties without a planted bug yet, and why (a new property must not join this list lightly)
NOT_PLANTED = {
    "benchmark.scaling": "a benchmark's own check (O(n^2) scaling), run by harness bench, not a property of a target",
    **{f"history.{name}": "no planted hidden-state bug yet; the history property runs on every target"
       for name in ("attention_with_kvcache", "bert_embeddings", "build_inputs", "make_nsp_pairs", "residual_block",
                    "sinusoidal_position_embedding", "span_corruption", "t5_relative_position_bias")},
}


def _repro(capsys, line: str, impl: Path | None = None) -> tuple[int, str]:
    """Run a repro line through the CLI here (``impl``: with that target instead of the one it
    names); returns (exit status, output)."""
    args = shlex.split(line)
    assert args[:4] == ["python", "-m", "harness", "repro"], line
    if impl is not None:
        args[args.index("--impl") + 1] = str(impl)
    capsys.readouterr()
    status = cli_main(args[3:])
    return status, capsys.readouterr().out


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_planted_bug_is_caught(pytester, capsys, bug):
    out = assert_caught(pytester, bug.suite, bug.path, bug.test, bug.messages)
    for phrase in bug.absent:
        assert phrase not in out, f"{bug.id}: the failure says {phrase!r}, which belongs to another cause:\n{out[-3000:]}"
    if bug.suite.name == "test_history.py":
        assert len(history_of(out)) >= 2, out[-3000:]
    if bug.test == "test_call_sequences":
        assert len(assert_call_program(out)) >= 2, out[-3000:]
        if bug in REPLAYED:
            line = out.split("repro:", 1)[1].splitlines()[0].strip()
            failing_call = re.search(r"call \d+ of \d+", out).group(0)
            status, replay = _repro(capsys, line)
            assert status == 1 and "FAILED" in replay and failing_call in replay, replay[-3000:]
            status, control = _repro(capsys, line, impl=bug.path.parent / "_base.py")
            assert status == 0 and "PASSED" in control, control[-2000:]


FOLDERS = sorted(p.name for p in planted_index.PLANTED.iterdir() if p.is_dir() and not p.name.startswith("_"))


@pytest.mark.parametrize("folder", FOLDERS)
def test_every_planted_file_describes_its_bug_or_is_used_by_name(folder):
    """A file that plants a bug a property catches names its real pattern and a property the suites
    define; any other file under tests/planted/ (a base, a control, a declared convention, a hostile
    target, a bug a benchmark catches) is used by name from the self-tests or scripts: nothing there
    is dead."""
    users = "\n".join(p.read_text() for d in ("tests", "scripts", ".ci") for p in (ROOT / d).glob("*")
                      if p.is_file() and p.suffix in (".py", ".sh", ""))
    for path in sorted((planted_index.PLANTED / folder).glob("*.py")):
        if path.name.startswith("_"):
            continue
        doc = planted_index.docstring(path)
        described = planted_index.describe(path)
        where = path.relative_to(ROOT)
        if described is not None:
            assert "Real pattern" in doc, f"{where}: the docstring does not name the real pattern it mimics"
            assert described.property in planted_index.properties(), f"{where}: no suite defines {described.property}"
        else:  # (a bug caught by something else than a property: a benchmark, the call rules, isolation)
            assert path.name in users or path.stem in users, f"{where}: neither a described bug nor used by name"


def test_every_property_has_a_planted_bug():
    """Each property of the suites catches at least one planted bug (``NOT_PLANTED``: the known gaps)."""
    caught = {b.property for b in planted_index.planted()}
    missing = set(planted_index.properties()) - caught - set(NOT_PLANTED)
    assert not missing, f"properties without a planted bug that they catch: {sorted(missing)}"
    stale = set(NOT_PLANTED) & caught
    assert not stale, f"NOT_PLANTED lists properties that now have a planted bug: {sorted(stale)}"


def test_the_index_reads_what_a_file_says(tmp_path):
    """The docstring fields: the property of the first 'Caught by:', every 'Message:' line as written."""
    (tmp_path / "fam").mkdir()
    bug = tmp_path / "fam" / "bug.py"
    bug.write_text('"""Planted bug: x.\n\nReal pattern: y. Caught by: rmsnorm.eps (measured).\n'
                   'Message: convention mismatch\nMessage: RMSNorm(  \nAbsent: rope.frequencies\n"""\nx = 1\n')
    found = planted_index.describe(bug)
    assert (found.property, found.messages, found.absent, found.id, found.test) == (
        "rmsnorm.eps", ("convention mismatch", "RMSNorm("), ("rope.frequencies",), "fam/bug", "test_eps")
    assert found.suite == ROOT / "suites" / "norms" / "test_rmsnorm.py"
    bug.write_text('"""A correct base."""\n')
    assert planted_index.describe(bug) is None
