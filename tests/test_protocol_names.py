"""Protocol names are the names a target provides, not the ones it imports (harness/boundary/provided.py).

A user's file that builds its ``apply_rotary_embedding`` on a library's ``RotaryEmbedding`` gets
that function tested and the library class ignored (named in the report header); listed in
``__all__`` the class is tested. torch.nn, torch.nn.functional, the reference, every shipped
adapter, re-exporting packages and the user's own helper modules keep their names.
"""
from __future__ import annotations

import ast
import glob
import sys
from pathlib import Path

import pytest

from harness.spec import protocol
from harness.adapters.releases import release_dir
from harness.boundary.loader import load_target
from harness.boundary.target_import import Missing
from tests.planted_support import release_target, run_suite

ROOT = Path(__file__).resolve().parents[1]
ROPE, MODULE = "apply_rotary_embedding", "RotaryEmbedding"
IGNORED_RET = "ignored: RotaryEmbedding (from rotary_embedding_torch; list it in `__all__` to test it)"

#: a correct interleaved RoPE (float64 angles, cast back), next to an imported library class
USER_ROPE = '''
import torch
{imports}

HARNESS_CONVENTIONS = {{"rope_layout": "interleaved"}}
{exports}

def apply_rotary_embedding(x, positions, base=10000.0):
    d = x.shape[-1]
    inv = base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=x.device) / d)
    ang = positions.to(torch.float64)[..., None] * inv  # (L, D/2), or (B, 1, L, D/2) for (B, L) positions
    ang = ang[:, None] if positions.dim() == 2 else ang
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., 0::2].to(torch.float64), x[..., 1::2].to(torch.float64)
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
    return out.to(x.dtype)
'''




@pytest.fixture
def isolated():
    loaded = []

    def load(spec):
        t = load_target(spec, isolation="process", timeout=60)
        loaded.append(t)
        return t
    yield load
    for t in loaded:
        t.close()


def user_rope(imports: str, exports: str = "") -> str:
    return USER_ROPE.format(imports=imports, exports=exports)


def ret_release() -> str:
    """The folder of rotary-embedding-torch 0.8.3 side by side (skipped, or failed in CI, without it)."""
    release_target("unused", "ret-0.8.3", "rotary-embedding-torch", "0.8.3")
    return str(release_dir("ret-0.8.3"))


# ---- a library class imported under a protocol name ----------------------------------------------

@pytest.mark.optional_libs("x_transformers")  # (README command 1 installs none: skipped there)
def test_imported_library_class_is_ignored_and_named(write):
    path = write("xt_rope.py", user_rope("from x_transformers.x_transformers import RotaryEmbedding\n"
                                         "from torch.nn import LayerNorm"))
    target = load_target(path)
    assert target.load_error is None
    assert target.available() == [ROPE]
    assert target.info.ignored == {MODULE: "x_transformers", "LayerNorm": "torch"}
    with pytest.raises(Missing, match=r"ignored: RotaryEmbedding \(from x_transformers; list it in `__all__`"):
        target.lookup(MODULE)
    assert callable(target.lookup(ROPE))


@pytest.mark.optional_libs("x_transformers")
def test_listed_in_all_it_is_tested(write):
    path = write("xt_rope_all.py", user_rope("from x_transformers.x_transformers import RotaryEmbedding",
                                             "__all__ = ['RotaryEmbedding', 'apply_rotary_embedding']"))
    target = load_target(path)
    assert set(target.available()) == {ROPE, MODULE} and target.info.ignored == {}
    import x_transformers.x_transformers as xt
    assert target.lookup(MODULE) is xt.RotaryEmbedding


def test_release_rotary_embedding_torch_is_ignored_and_the_function_passes(pytester, tmp_path):
    """End to end, as a user runs it: rotary-embedding-torch 0.8.3's class imported next to a correct
    ``apply_rotary_embedding``: every rope property passes, the module suite skips with the reason,
    and the header names the ignored class."""
    where = ret_release()
    path = tmp_path / "ret_rope.py"
    path.write_text(user_rope(f"import sys\nsys.path.insert(0, {where!r})\n"
                              "from rotary_embedding_torch import RotaryEmbedding"))
    result = run_suite(pytester, ["test_rope.py", "test_rope_module.py"], [path], None, "-rs")
    out = result.stdout.str()
    assert IGNORED_RET in out, out[-3000:]
    result.assert_outcomes(passed=7, skipped=1)
    assert f"target {str(path)!r} does not provide 'RotaryEmbedding', it imports it; {IGNORED_RET}" in out


def test_release_class_listed_in_all_is_looked_up(isolated, tmp_path):
    where = ret_release()
    path = tmp_path / "ret_rope_all.py"
    path.write_text(user_rope(f"import sys\nsys.path.insert(0, {where!r})\n"
                              "from rotary_embedding_torch import RotaryEmbedding",
                              "__all__ = ['RotaryEmbedding']"))
    target = isolated(str(path))
    assert MODULE in target.available() and target.info.ignored == {}


# ---- what stays the target's own -----------------------------------------------------------------

@pytest.mark.parametrize("spec,names", [
    ("torch.nn", {"LayerNorm", "RMSNorm"}),
    ("torch.nn.functional", {"scaled_dot_product_attention"}),  # a C builtin: torch._C._nn
    ("reference", set(protocol.NAMES)),
])
def test_a_package_keeps_its_own_names(spec, names):
    target = load_target(spec)
    assert names <= set(target.available()) and target.info.ignored == {}
    for name in names:
        target.lookup(name)


def _defined_names(path: str) -> set[str]:
    """The protocol names an adapter's source binds at its top level (def, class, assignment)."""
    tree = ast.parse(Path(path).read_text())
    bound = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    bound |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return bound & set(protocol.NAMES)


ADAPTERS = sorted(p for p in glob.glob(str(ROOT / "harness/adapters/*.py")) if not p.endswith("__init__.py"))


@pytest.mark.parametrize("path", ADAPTERS, ids=lambda p: Path(p).stem)
def test_every_adapter_keeps_its_names(path, isolated):
    """Every adapter wraps a library; what it binds under a protocol name is its own (nothing
    ignored), including what the release adapters take over from the module they import."""
    target = isolated(f"harness.adapters.{Path(path).stem}")
    if target.load_error:
        pytest.skip(f"does not load here: {target.load_error.splitlines()[0]}")
    assert target.info.ignored == {}
    assert _defined_names(path) <= set(target.available())


def test_a_path_loaded_helper_module_is_the_users(write, tmp_path):
    helpers = tmp_path / "helpers"
    write("mykernels_helpers.py", """
        import torch
        class LayerNorm(torch.nn.LayerNorm):
            pass
        """, where=helpers)
    path = write("uses_helper.py", f"""
        import sys
        sys.path.insert(0, {str(helpers)!r})
        from mykernels_helpers import LayerNorm
        """)
    try:
        target = load_target(path)
        assert target.available() == ["LayerNorm"] and target.info.ignored == {}
        assert target.lookup("LayerNorm").__module__ == "mykernels_helpers"
    finally:
        sys.path.remove(str(helpers))
        sys.modules.pop("mykernels_helpers", None)


def test_a_re_exporting_package_keeps_its_names(tmp_path, monkeypatch):
    pkg = tmp_path / "myrepkg"
    (pkg / "kernels").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from myrepkg.kernels.norm import LayerNorm\n"
                                     "from .kernels.attn import scaled_dot_product_attention\n")
    (pkg / "kernels" / "__init__.py").write_text("")
    (pkg / "kernels" / "norm.py").write_text("import torch\nclass LayerNorm(torch.nn.LayerNorm):\n    pass\n")
    (pkg / "kernels" / "attn.py").write_text(
        "import torch.nn.functional as F\n"
        "def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,"
        " scale=None, enable_gqa=False):\n"
        "    return F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,"
        " scale=scale, enable_gqa=enable_gqa)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        target = load_target("myrepkg")
        assert set(target.available()) == {"LayerNorm", "scaled_dot_product_attention"}
        assert target.info.ignored == {}
    finally:
        for name in [m for m in sys.modules if m == "myrepkg" or m.startswith("myrepkg.")]:
            del sys.modules[name]


def test_a_function_of_the_users_wrapping_a_library_one_is_the_users(write):
    """``functools.wraps`` copies the library's ``__module__``; the globals the function runs in
    are the file's, so it is still the user's own."""
    path = write("wrapped.py", """
        import functools
        import torch.nn.functional as F

        @functools.wraps(F.scaled_dot_product_attention)
        def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                         is_causal=False, scale=None, enable_gqa=False):
            return F.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal)
        """)
    target = load_target(path)
    assert target.available() == ["scaled_dot_product_attention"] and target.info.ignored == {}


def test_a_library_function_imported_by_a_file_is_ignored(write):
    path = write("imports_sdpa.py", "from torch.nn.functional import scaled_dot_product_attention\n")
    target = load_target(path)
    assert target.available() == [] and target.info.ignored == {"scaled_dot_product_attention": "torch"}


@pytest.mark.parametrize("planted", [
    "tests/planted/bert/model_elmo_claims_bidirectional.py",  # build_model from reference.dependency_models
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/planted").rglob("*.py")
            if "from _base import Attention, LayerNorm" in p.read_text()),  # names from a path-loaded _base
])
def test_planted_targets_that_import_their_names_keep_them(planted, isolated):
    target = isolated(str(ROOT / planted))
    assert target.info.ignored == {}
    assert target.available(), target.load_error
