"""harness.basics.heap: the garbage-collector policy of `harness check`'s pytest processes applies
only where check asks for it, and does what it says (frozen heap, rare full collections)."""
import gc
import os

from harness.basics import heap
from harness.cli import build_parser
from harness.commands import check


def test_settle_is_off_in_a_users_own_session(monkeypatch):
    monkeypatch.delenv(heap.ENV, raising=False)
    before = gc.get_threshold(), gc.get_freeze_count()
    assert heap.settle() is False
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_settle_freezes_the_heap_and_spaces_out_full_collections(monkeypatch):
    monkeypatch.setenv(heap.ENV, "settle")
    threshold = gc.get_threshold()
    try:
        assert heap.settle() is True
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (threshold[0], threshold[1], heap.FULL_EVERY)
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_check_asks_for_it_and_leaves_out_pytests_closing_collections(monkeypatch):
    monkeypatch.delenv(heap.ENV, raising=False)
    monkeypatch.setenv("PYTHONHASHSEED", os.environ.get("PYTHONHASHSEED", "0"))  # (check sets a default)
    args = build_parser().parse_args(["check", "--impl", "reference", "--jobs", "1"])
    argv = check.pytest_argv(args)
    assert argv[argv.index("no:unraisableexception") - 1] == "-p"
    seen = {}

    def main(argv):
        seen["env"] = os.environ.get(heap.ENV)
        return 0

    monkeypatch.setattr("pytest.main", main)
    assert check.main(args) == 0
    assert seen["env"] == "settle"


def test_the_cli_imports_only_the_chosen_commands_module():
    """``python -m harness check ...`` builds check's parser without importing the other commands'
    modules (sweep's pandas, bench's models): the controller of a conformance run starts sooner."""
    import subprocess
    import sys
    code = ("import sys; from harness.cli import build_parser; "
            "a = build_parser(['check', '--impl', 'reference']).parse_args(['check', '--impl', 'reference']); "
            "print(a.command, a.impl, sorted(m for m in sys.modules if m.startswith('harness.commands.')), "
            "'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.split() == ["check", "['reference']", "['harness.commands.check']", "False"], out
