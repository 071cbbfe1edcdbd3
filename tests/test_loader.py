"""Loading targets (harness/boundary/loader.py) and the protocol's signature check
(harness/spec/protocol.py): file vs module, errors captured not raised, lookup's
Missing / BrokenTarget, signature_problem."""
from __future__ import annotations

import os
import sys

import pytest
import torch

from harness.spec import protocol
from harness.boundary.loader import Target, load_target
from harness.boundary.target_import import BrokenTarget, Missing, _module_name_for_file, describe
from harness.spec.protocol import signature_problem

SDPA = "scaled_dot_product_attention"
GOOD = '''
__version__ = "1.2.3"
HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right"}

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    return query
'''




def test_module_target():
    target = load_target("reference")
    assert target.load_error is None and target.module is not None
    assert target.id == target.spec == "reference" and repr(target) == "Target('reference')"
    assert {SDPA, "sliding_window_attention"} <= set(target.available())
    assert callable(target.lookup(SDPA))


def test_builtin_module_target_and_its_version():
    target = load_target("torch.nn.functional")
    assert SDPA in target.available()
    assert target.lookup(SDPA) is torch.nn.functional.scaled_dot_product_attention
    assert target.version == torch.__version__  # from the top-level package
    assert target.file.endswith("functional.py")


def test_file_target(write):
    path = write("good.py", GOOD)
    target = load_target(path, device="cpu")
    assert target.load_error is None
    assert target.module.__name__ == _module_name_for_file(path)
    assert target.module.__name__.startswith("harness_target_good_")
    assert target.file == path and target.version == "1.2.3"
    assert target.available() == [SDPA]
    assert target.conventions == {"causal_alignment": "bottom_right"}
    assert target.lookup(SDPA)(torch.ones(1), None, None).item() == 1.0


def test_file_is_imported_once(write):
    path = write("once.py", "import itertools\nCOUNT = next(itertools.count())\n")
    a, b = load_target(path), load_target(path)
    assert a.module is b.module


def test_same_stem_in_two_folders_are_two_modules(write, tmp_path):
    p1 = write("same.py", "WHO = 1\n", tmp_path / "one")
    p2 = write("same.py", "WHO = 2\n", tmp_path / "two")
    assert load_target(p1).module.WHO == 1 and load_target(p2).module.WHO == 2


def test_unversioned_and_unloaded_versions(write):
    assert load_target(write("plain.py", "X = 1\n")).version is None
    broken = load_target("/no/such/target.py")
    assert broken.version is None and broken.file == "?" and broken.available() == []


def test_missing_file_is_captured():
    target = load_target("/no/such/target.py")
    assert target.module is None
    assert target.load_error.startswith("FileNotFoundError: no such file: '/no/such/target.py'")
    with pytest.raises(BrokenTarget, match="could not be loaded: FileNotFoundError"):
        target.lookup(SDPA)


def test_path_without_py_suffix_is_still_a_path():
    target = load_target("no/such/dir")
    assert target.load_error.startswith("FileNotFoundError")


def test_missing_module_is_captured():
    target = load_target("no_such_module_for_the_harness_xyz")
    assert "ModuleNotFoundError: No module named 'no_such_module_for_the_harness_xyz'" in target.load_error


def test_directory_is_captured(tmp_path):
    target = load_target(str(tmp_path))
    assert target.load_error and "ImportError" in target.load_error


def test_import_error_is_captured_with_where_it_was_raised(write):
    path = write("bad.py", "X = 1\n\nraise ValueError('bad at import')\n")
    target = load_target(path)
    assert target.module is None
    assert target.load_error.startswith("ValueError: bad at import")
    assert f"(raised at {path}:3)" in target.load_error
    assert _module_name_for_file(path) not in sys.modules  # a half-imported module is not kept
    with pytest.raises(BrokenTarget, match="bad at import"):
        target.lookup(SDPA)


def test_syntax_error_is_captured(write):
    path = write("syntax.py", "def broken(:\n")
    target = load_target(path)
    assert "SyntaxError: invalid syntax" in target.load_error
    assert f'File "{path}", line 1' in target.load_error  # the message says where


def test_system_exit_at_import_is_captured(write):
    target = load_target(write("exits.py", "import sys\nsys.exit(4)\n"))
    assert target.load_error.startswith("SystemExit: 4")


def test_keyboard_interrupt_at_import_is_captured(write):
    """A target raising KeyboardInterrupt at import is a load error, not the end of the session."""
    target = load_target(write("interrupts.py", "raise KeyboardInterrupt\n"))
    assert target.load_error.startswith("KeyboardInterrupt")


def test_cli_conventions_are_kept(write):
    target = load_target(write("conv.py", GOOD), cli_conventions={"causal_alignment": "top_left"})
    assert target.cli_conventions == {"causal_alignment": "top_left"}
    assert target.conventions["causal_alignment"] == "top_left"


def test_lookup_missing_name_is_missing_not_broken(write):
    target = load_target(write("empty.py", "X = 1\n"))
    with pytest.raises(Missing) as info:
        target.lookup(SDPA)
    assert str(info.value).endswith(f"has no attribute {SDPA!r}")
    assert not issubclass(Missing, BrokenTarget)


def test_lookup_wrong_signature_is_broken(write):
    target = load_target(write("sig.py", f"def {SDPA}(q, k):\n    return q\n"))
    with pytest.raises(BrokenTarget) as info:
        target.lookup(SDPA)
    msg = str(info.value)
    assert msg.startswith(f"{target.spec}.{SDPA}: signature (q, k) lacks parameter(s) query, key, value,")
    assert f"the protocol calls {protocol.NAMES[SDPA].signature}" in msg


def test_lookup_of_a_non_protocol_name_skips_the_signature_check(write):
    target = load_target(write("other.py", "def helper(x):\n    return x\n"))
    assert target.lookup("helper")(3) == 3


# ---- signature_problem ----------------------------------------------------------------------

def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    return query


def test_signature_exact_and_with_extra_defaults_pass():
    assert signature_problem(SDPA, _sdpa) is None

    def more(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False, backend="math"):
        return query

    assert signature_problem(SDPA, more) is None


def test_signature_with_var_keyword_passes():
    assert signature_problem(SDPA, lambda query, key, value, **kw: query) is None


def test_signature_missing_parameter():
    def no_gqa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
        return query

    problem = signature_problem(SDPA, no_gqa)
    assert problem and "lacks parameter(s) enable_gqa" in problem


def test_builtins_without_signature_pass():
    assert signature_problem(SDPA, torch.nn.functional.scaled_dot_product_attention) is None


def test_not_callable_and_not_a_class():
    assert signature_problem(SDPA, 3).startswith("expected a callable (scaled_dot_product_attention(")
    assert signature_problem("LayerNorm", _sdpa).startswith("expected a class (LayerNorm(")
    assert signature_problem("LayerNorm", torch.nn.LayerNorm) is None


def test_an_optional_parameter_the_function_lacks_is_a_feature_it_does_not_support():
    """The record's ``options``: attention_with_kvcache without block_table/sinks/chunk is not broken;
    it does not support paging, sinks and chunks (as if declared); **kwargs takes them all."""
    def old(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True, scale=None,
            rotary_cos=None, rotary_sin=None, rotary_interleaved=False, softcap=None):
        return q

    kv = "attention_with_kvcache"
    assert signature_problem(kv, old) is None
    lacking = protocol.lacking_features(kv, old)
    assert set(lacking) == {"kvcache_paged", "sinks", "kvcache_chunked"}, lacking
    assert lacking["kvcache_paged"] == "attention_with_kvcache takes no 'block_table' parameter"
    assert protocol.lacking_features(kv, lambda q, k_cache, v_cache, **kw: q) == {}
    assert protocol.lacking_features(SDPA, _sdpa) == {}


def test_a_target_without_the_parameter_has_the_feature_lacking(write):
    target = load_target(write("old_kv.py", "def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, "
                                            "cache_seqlens=None, window=None, causal=True, scale=None, "
                                            "rotary_cos=None, rotary_sin=None, rotary_interleaved=False):\n"
                                            "    return q\n"))
    assert set(target.info.lacking) == {"kvcache_paged", "softcap", "sinks", "kvcache_chunked"}
    target.close()


def test_unknown_name_has_no_problem():
    assert signature_problem("not_in_the_protocol", object()) is None


def test_protocol_names_are_well_formed():
    for name, entry in protocol.NAMES.items():
        assert entry.name == name and entry.signature.startswith(name.split(".")[-1]), name
        assert entry.kind in ("function", "class", "constant"), name


def test_describe():
    assert describe(_sdpa).startswith("_sdpa(query, key, value, attn_mask=None")
    assert describe(torch.nn.functional.scaled_dot_product_attention) == "scaled_dot_product_attention"


def test_target_defaults():
    target = Target(spec="x")
    assert target.device == "cpu" and target.cli_conventions == {} and target.available() == []


# ---- the same contract in a worker process (--isolation process) ----------------------------

@pytest.fixture
def isolated(request):
    loaded = []

    def load(spec, **kw):
        t = load_target(spec, isolation="process", timeout=30, **kw)
        loaded.append(t)
        return t
    yield load
    for t in loaded:
        t.close()


def test_isolated_target_loads_in_a_worker_and_is_called_there(write, isolated):
    path = write("pid.py", "import os\nPID = os.getpid()\n"
                           "def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,"
                           " is_causal=False, scale=None, enable_gqa=False):\n    return query * 2\n")
    target = isolated(path)
    assert target.load_error is None and target.module is None and target.isolated
    assert target.available() == [SDPA] and target.file == path
    assert path not in {getattr(m, "__file__", None) for m in list(sys.modules.values())}  # never imported here
    assert target.lookup("PID") != os.getpid()
    x = torch.arange(6.0).reshape(1, 1, 2, 3)
    assert torch.equal(target.lookup(SDPA)(x, x, x), 2 * x)


COUNTING = ("CALLS = []\nSETTINGS = {'x': 1}\n"
            "def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,"
            " is_causal=False, scale=None, enable_gqa=False):\n    return query * 2\n")


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_a_function_is_looked_up_once_per_worker_and_data_every_time(write, isolation):
    """A conformance run looks up its target's names once per example; in a worker each lookup
    was a round trip (4 in 10 requests of a run). Functions are kept per worker; plain data
    (a dict a suite might change) is looked up afresh."""
    target = load_target(write(f"count_{isolation}.py", COUNTING), isolation=isolation, timeout=30)
    try:
        asked = []
        real = target.backend.lookup
        target.backend.lookup = lambda name: asked.append(name) or real(name)
        first, again = target.lookup(SDPA), target.lookup(SDPA)
        assert first is again and asked == [SDPA]
        target.lookup("SETTINGS")["x"] = 2
        settings = target.lookup("SETTINGS")
        assert asked == [SDPA, "SETTINGS", "SETTINGS"]
        if isolation == "process":  # (by value: the worker's own dict is unchanged)
            assert settings == {"x": 1}
        x = torch.arange(6.0).reshape(1, 1, 2, 3)
        assert torch.equal(again(x, x, x), 2 * x)
    finally:
        target.close()


def test_a_kept_handle_is_not_used_after_its_worker_died(write, isolated):
    """After the worker died (a crash in an earlier example), the name is looked up in the new
    worker: the old handle would name an object that no longer exists."""
    target = isolated(write("count_dies.py", COUNTING))
    first = target.lookup(SDPA)
    target.backend.kill()  # (what a crash leaves: no process)
    fresh = target.lookup(SDPA)
    assert fresh is not first and fresh._ref.generation == first._ref.generation + 1
    x = torch.arange(6.0).reshape(1, 1, 2, 3)
    assert torch.equal(fresh(x, x, x), 2 * x)
    from harness.boundary import target_ops
    assert torch.equal(target.backend.apply(target_ops.call_each, (fresh, [(x, x, x)], {}), {}, "x")[0], 2 * x)


def test_isolated_lookup_missing_and_broken_names(write, isolated):
    target = isolated(write("sig2.py", f"def {SDPA}(q, k):\n    return q\n"))
    with pytest.raises(BrokenTarget, match="lacks parameter"):
        target.lookup(SDPA)
    with pytest.raises(Missing):
        target.lookup("LayerNorm")


def test_isolated_load_error_names_cause_and_line(write, isolated):
    path = write("bad2.py", "X = 1\n\nraise ValueError('bad at import')\n")
    target = isolated(path)
    assert target.load_error.startswith("ValueError: bad at import")
    assert f'{path}", line 3' in target.load_error
    assert "harness/boundary/worker.py" not in target.load_error and "importlib" not in target.load_error


def test_module_getattr_that_raises_breaks_that_name_only(write):
    path = write("lazy.py", "HARNESS_DTYPES = None\nHARNESS_SIZES = None\nHARNESS_CONVENTIONS = None\n"
                            "HARNESS_UNSUPPORTED = None\nHARNESS_TILES = None\n"
                            "def __getattr__(name):\n    raise RuntimeError('lazy ' + name)\n")
    target = load_target(path)
    assert target.load_error is None
    with pytest.raises(BrokenTarget, match="looking it up raised RuntimeError: lazy LayerNorm"):
        target.lookup("LayerNorm")


@pytest.mark.parametrize("decl,message", [
    ("HARNESS_DTYPES = 7", "HARNESS_DTYPES = 7: expected a tuple"),
    ("HARNESS_TILES = 64", "HARNESS_TILES = 64 is a single value where a tuple belongs; write (64,)"),
    ("HARNESS_TILES = (64, 'x')", "expected a tuple of block sizes"),
    ("HARNESS_DTYPES = ('float8',)", "unknown dtype(s) ['float8']"),
    ("HARNESS_DTYPES = ()", "empty, so no configuration could be drawn"),
    ("import torch\nHARNESS_DTYPES = torch.float16", "single value where a tuple belongs; write ('float16',)"),
    ("HARNESS_SIZES = [8, 16]", "expected a dict of config field"),
    ("HARNESS_SIZES = {'E': 'many'}", "expected a range or a set of ints"),
    ("HARNESS_SIZES = {'E': set()}", "is empty"),
    ("HARNESS_CONVENTIONS = ['top_left']", "expected a dict"),
    ("HARNESS_CONVENTIONS = {'rope': 'interleaved'}", "unknown convention 'rope'"),
])
def test_broken_declarations_are_named(write, decl, message):
    target = load_target(write("decl.py", decl + "\n"))
    assert target.load_error.startswith("broken declaration: ") and message in target.load_error


def test_good_declarations_are_read(write):
    target = load_target(write("decl_ok.py", "HARNESS_DTYPES = ['float16']\nHARNESS_SIZES = {'E': [8, 16]}\n"
                                             "HARNESS_CONVENTIONS = {'causal_alignment': 'bottom_right'}\n"))
    assert target.load_error is None and target.dtypes == ("float16",)
    assert target.sizes == {"E": frozenset({8, 16})}
    assert target.conventions == {"causal_alignment": "bottom_right"}


def test_a_file_target_gets_its_own_sibling_module_not_another_folder_s(tmp_path):
    """Two kernel folders, each with a ``_base.py`` its target imports from its own folder: loaded
    in one process, each gets its own (the second used to get the first folder's cached module)."""
    from harness.boundary.target_import import import_spec
    for name, value in (("a", 1), ("b", 2)):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "_base.py").write_text(f"VALUE = {value}\n")
        (folder / f"kernel_{name}.py").write_text(
            "import pathlib, sys\nsys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))\n"
            "from _base import VALUE\n")
    try:
        assert import_spec(str(tmp_path / "a" / "kernel_a.py")).VALUE == 1
        assert import_spec(str(tmp_path / "b" / "kernel_b.py")).VALUE == 2
    finally:
        sys.modules.pop("_base", None)
        for name in ("a", "b"):
            while str(tmp_path / name) in sys.path:
                sys.path.remove(str(tmp_path / name))
