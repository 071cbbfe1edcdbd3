"""The history properties (``suites/test_history.py``) catch functions that hide state.

Every ``tests/planted/<family>/history_*.py`` target is that family's correct ``_base.py`` with a
cache that returns what another call computed; each call alone is right, so every stateless
property passes it. Each must fail its ``history.<name>`` property under the derandomized ``ci``
profile, shrunk to a history of at least two calls, with a repro line. Real releases:
rotary-embedding-torch 0.8.2 wrapped as a plain ``apply_rotary_embedding`` (one library module
per (dim, base), its offset cache used for contiguous positions, as users' code does) is caught;
0.8.3, wrapped the same way, passes. Controls: ``reference`` and the planted bases pass.

The planted bugs themselves (each file names the property that catches it) run in
``tests/test_planted_bugs.py``; this file keeps the controls, declared conventions and releases.
"""
from __future__ import annotations



from planted_support import ROOT, assert_caught, conformance, release_target, run_suite, history_of

SUITE = "test_history.py"
PLANTED = ROOT / "tests" / "planted"

DIFFERS = "differs after the calls before it on the same target"


def test_correct_targets_pass(pytester, tmp_path):
    """reference and the planted bases (positions, attention, packed attention, MLM masking, distillation)
    pass every history property they have a name for."""
    report = tmp_path / "report"
    impls = ["reference", PLANTED / "positions" / "_base.py", PLANTED / "attention" / "_base.py",
             PLANTED / "varlen" / "_base.py", PLANTED / "bert" / "_mlm_base.py", PLANTED / "bert" / "_distill_base.py"]
    result = run_suite(pytester, [SUITE], impls, None, "--conformance-report", str(report))
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.str()[-3000:]
    cells = conformance(report)
    for (prop, target), cell in cells.items():
        assert cell == "pass" or cell.startswith(("convention:", "skipped")), (prop, target, cell)


#: rotary-embedding-torch wrapped as the protocol's FUNCTION, as a user's model code does it: one
#: library module per (dim, base) kept behind the function; contiguous positions go through the
#: module's cache (``rotary(t, seq_len=L, offset=o)``), any others through its uncached path
RELEASE_AS_FUNCTION = '''
import sys
from harness.adapters.releases import release_dir
sys.path.insert(0, str(release_dir("ret-{version}")))
import torch
from rotary_embedding_torch import RotaryEmbedding as _Library, apply_rotary_emb as _apply

HARNESS_CONVENTIONS = {{"rope_layout": "interleaved"}}
HARNESS_DTYPES = ("float32", "float16", "bfloat16")  # (its angles are float32)
_MODULES = {{}}


def apply_rotary_embedding(x, positions, base=10000.0):
    rotary = _MODULES.setdefault((x.shape[-1], float(base)), _Library(x.shape[-1], theta=base)).to(x.device)
    L = x.shape[-2]
    with torch.no_grad():
        if positions.dim() == 1 and bool((positions - positions[0] == torch.arange(L, device=positions.device)).all()):
            freqs = rotary(positions.float(), seq_len=L, offset=int(positions[0]))
        else:
            freqs = rotary(positions.float())
            freqs = freqs[:, None] if freqs.dim() == 3 else freqs  # positions (B, L): over the heads
        return _apply(freqs, x)
'''


def _release_function(tmp_path, version: str):
    release_target(f"harness.adapters.rotary_embedding_torch_{version.replace('.', '_')}", f"ret-{version}",
                   "rotary-embedding-torch", version)  # (skips, or fails under $HARNESS_REQUIRE_RELEASES)
    path = tmp_path / f"ret_{version.replace('.', '_')}_function.py"
    path.write_text(RELEASE_AS_FUNCTION.format(version=version))
    return path


def test_buggy_release_wrapped_as_a_function_is_caught(pytester, tmp_path):
    """0.8.2: after a call at an offset, a call from offset 0 (same dim and base) reads that call's rows."""
    out = assert_caught(pytester, SUITE, _release_function(tmp_path, "0.8.2"), "test_apply_rotary_embedding",
                        ["differs after the calls before it on the same target"])
    assert len(history_of(out)) >= 2


def test_fixed_release_wrapped_as_a_function_passes(pytester, tmp_path):
    target = _release_function(tmp_path, "0.8.3")
    report = tmp_path / "report"
    result = run_suite(pytester, [SUITE], [target], "test_apply_rotary_embedding", "--conformance-report", str(report))
    result.assert_outcomes(passed=1)
    assert conformance(report)[("history.apply_rotary_embedding", str(target))] == "convention:interleaved"
