"""The consistency section: several targets in one session held to each other.

- the planted pair (tests/planted/consistency/eager.py, fused.py) passes the attention-causal and
  RoPE properties alone, each with its conventions named; held to each other the section reports
  the convention they disagree on (attention.causal: top_left vs bottom_right) and the output the
  differential check finds different (RoPE called with its default base: fused.py's bug), in the
  terminal and in conformance.md / .json / consistency.csv; the session passes without
  ``--require-consistent`` and fails with it;
- transformers 4.38.2's Mistral eager and FlashAttention-2 window paths (HF issue 29623: w keys vs
  w + 1) disagree on sliding_window.window_extent and the window outputs, and
  ``--require-consistent`` fails (skipped with the reason without the side-by-side release);
- tests/planted/consistency/sibling_defaults.py (one sibling difference per name) disagrees with
  reference on each of LayerNorm, RMSNorm, distillation_loss, build_inputs, alibi_slopes and
  attention_with_kvcache and attention_varlen (and varlen against dense SDPA); the names with random draws or initialisation say why they are not compared;
- tests/planted/consistency/paged_sibling.py (reference on a linear cache, every paged item through
  the table's first row) disagrees with reference's linear call on the paged call, while the torch
  base of the planted KV-cache bugs, which pages, agrees with reference on both calls;
- controls: reference and torch.nn.functional agree (``--require-consistent`` passes), and so do
  reference's and torch.nn's norms; one target alone has no section and skips the differential checks.
Every run is in-process under the derandomized ci profile.
"""
from __future__ import annotations

import json

import pytest

from planted_support import ROOT, release_target, run_suite

PAIR = ROOT / "tests" / "planted" / "consistency"
#: the differential checks (suites/consistency/test_consistency.py; each family declares its Cases in suites/<family>/specs.py)
CONSISTENCY = ROOT / "suites" / "consistency"
EAGER, FUSED = PAIR / "eager.py", PAIR / "fused.py"


def _pair(pytester, tmp_path, *extra):
    report = tmp_path / "report"
    result = run_suite(pytester, ["test_attention_masks.py", "test_rope.py", CONSISTENCY],
                       [EAGER, FUSED], "test_causal or test_frequencies or test_agreement or test_outputs_agree",
                       "--conformance-report", str(report), *extra)
    return result, report


def test_planted_pair_disagrees(pytester, tmp_path):
    result, report = _pair(pytester, tmp_path)
    assert result.ret == 0, result.stdout.str()[-3000:]  # reported, not failed
    out = result.stdout.str()
    assert "consistency (targets held to each other)" in out
    assert f"backends disagree on attention.causal: {EAGER} top_left, {FUSED} bottom_right" in out, out[-3000:]
    assert "backends disagree on apply_rotary_embedding outputs" in out, out[-3000:]
    assert "--require-consistent fails" in out
    # alone, each passes: every property cell of both targets is a pass or a named convention
    cells = json.loads((report / "conformance.json").read_text())
    assert {r["result"].split(":")[0] for r in cells["results"]} <= {"pass", "convention"}, cells["results"]
    section = cells["consistency"]
    assert any("attention.causal" in line for line in section["disagreements"])
    rows = {(r["part"], r["item"]): r["result"] for r in section["rows"]}
    assert rows[("convention", "attention.causal")] == "disagree"
    assert rows[("convention", "rope.frequencies")] == "agree"  # both rotate_half
    assert rows[("differential", "apply_rotary_embedding")] == "disagree"
    assert "## Consistency" in (report / "conformance.md").read_text()
    assert "apply_rotary_embedding,disagree" in (report / "consistency.csv").read_text()


def test_require_consistent_fails_the_planted_pair(pytester, tmp_path):
    result, _ = _pair(pytester, tmp_path, "--require-consistent")
    assert result.ret == 1
    assert "--require-consistent: " in result.stdout.str()


def test_hf_mistral_window_paths_disagree(pytester, tmp_path):
    """transformers 4.38.2: the eager mask keeps w keys, the FA2 call window_size=(w, w) w + 1."""
    eager, fa2 = "harness.adapters.hf_mistral_eager_window", "harness.adapters.hf_mistral_fa2_window"
    for module in (eager, fa2):
        release_target(module, "tf-4.38.2", "transformers", "4.38.2")
    args = (["test_sliding_window.py", "test_consistency.py"], [eager, fa2],
            "test_window_extent or sliding_window_attention")
    result = run_suite(pytester, *args)
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]  # each passes alone (fa2 declares w+1)
    assert f"backends disagree on sliding_window.window_extent: {eager} w, {fa2} w+1" in out, out[-3000:]
    assert "backends disagree on sliding_window_attention outputs" in out
    strict = run_suite(pytester, *args, "--require-consistent")
    assert strict.ret == 1


def test_agreeing_targets_pass_require_consistent(pytester, tmp_path):
    result = run_suite(pytester, ["test_attention_masks.py", "test_consistency.py"],
                       ["reference", "torch.nn.functional"],
                       "test_causal or scaled_dot_product_attention", "--require-consistent")
    assert result.ret == 0, result.stdout.str()[-3000:]
    out = result.stdout.str()
    assert "backends disagree" not in out
    assert "conventions agree 1 of 1; differential checks: agree 1" in out, out[-2000:]


#: the names tests/planted/consistency/sibling_defaults.py differs from reference on, one way each
SIBLING_NAMES = ("LayerNorm", "RMSNorm", "distillation_loss", "build_inputs", "alibi_slopes", "attention_with_kvcache",
                 "attention_varlen", "attention_varlen vs dense", "build_model", "bert_embeddings", "rope_frequencies")


def test_sibling_paths_disagree_on_each_name(pytester, tmp_path):
    """Each differential check of the norm, objective, slope, KV-cache and model names fails when two
    targets differ in that name (and says so in the section), while torch.nn's norms agree with
    the reference's, transformers' eager and sdpa attention paths of one encoder agree, and the
    names with no differential check say why."""
    report = tmp_path / "report"
    sibling = str(PAIR / "sibling_defaults.py")
    result = run_suite(pytester, [CONSISTENCY], ["reference", sibling], None,
                       "--conformance-report", str(report))
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows = {r["item"]: r for r in json.loads((report / "conformance.json").read_text())["consistency"]["rows"]
            if r["part"] == "differential"}
    for name in SIBLING_NAMES:
        assert rows[name]["result"] == "disagree", (name, rows.get(name))
    control = run_suite(pytester, ["test_consistency.py"], ["reference", "torch.nn"], "LayerNorm or RMSNorm",
                        "--require-consistent")
    assert control.ret == 0, control.stdout.str()[-3000:]
    assert "differential checks: agree 2" in control.stdout.str()
    eager = tmp_path / "bert_eager.py"  # the reference encoder on transformers' eager attention (it runs sdpa)
    eager.write_text("from reference.dependency_models import build_bert_like\nMODEL_CLAIM = 'bidirectional'\n"
                     "def build_model():\n    return build_bert_like(attn_implementation='eager')\n")
    backends = run_suite(pytester, ["test_consistency.py"], ["reference", str(eager)], "build_model",
                         "--require-consistent")
    assert backends.ret == 0 and "differential checks: agree 1" in backends.stdout.str(), backends.stdout.str()[-3000:]
    why = run_suite(pytester, ["test_consistency.py"], ["reference", "reference"], "RotaryEmbedding",
                    "-rs")
    assert "not compared: the stateful form" in why.stdout.str(), why.stdout.str()[-2000:]


def test_paged_call_is_held_to_the_linear_one(pytester, tmp_path):
    """attention_with_kvcache's differential check calls every target on a linear cache and on a
    paged pool holding the same logical contents, and compares each paged output with the first
    target's linear one."""
    report = tmp_path / "report"
    sibling = str(PAIR / "paged_sibling.py")
    result = run_suite(pytester, ["test_consistency.py"], ["reference", sibling], "attention_with_kvcache",
                       "--conformance-report", str(report))
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows = {r["item"]: r for r in json.loads((report / "conformance.json").read_text())["consistency"]["rows"]
            if r["part"] == "differential"}
    assert rows["attention_with_kvcache"]["result"] == "disagree", rows.get("attention_with_kvcache")
    assert "paged (block_table), against the linear call" in rows["attention_with_kvcache"]["detail"], rows
    base = str(ROOT / "tests" / "planted" / "kvcache" / "_base.py")
    control = run_suite(pytester, ["test_consistency.py"], ["reference", base], "attention_with_kvcache",
                        "--require-consistent")
    assert control.ret == 0 and "differential checks: agree 1" in control.stdout.str(), control.stdout.str()[-3000:]


def test_one_target_has_no_section(pytester):
    result = run_suite(pytester, ["test_consistency.py"], ["reference"], "scaled_dot_product_attention",
                       "-rs")
    result.assert_outcomes(skipped=1)
    out = result.stdout.str()
    assert "needs two or more loaded --impl targets" in out
    assert "consistency (targets held to each other)" not in out


def test_section_from_rows():
    """The section's logic on rows as the plug-in collects them: a failure that is a convention
    mismatch carries what the code follows, a property measured on one target is not compared."""
    from harness.verdicts import consistency
    rows = [
        {"property": "sliding_window.window_extent", "target": "A", "convention": "w"},
        {"property": "sliding_window.window_extent", "target": "B", "convention": "w+1"},  # (a mismatch)
        {"property": "rope.frequencies", "target": "A", "convention": "rotate_half"},
        {"property": "rope.frequencies", "target": "B", "convention": "rotate_half"},
        {"property": "sinusoidal.origin", "target": "A", "convention": "interleaved"},
        {"property": "attention.agreement", "target": "A", "convention": None},
    ]
    differential = [{"check": "apply_rotary_embedding", "outcome": "agree", "reason": ""},
                    {"check": "sliding_window_attention", "outcome": "disagree", "reason": "x"}]
    assert consistency.disagreements(rows, differential) == [
        "backends disagree on sliding_window.window_extent: A w, B w+1",
        "backends disagree on sliding_window_attention outputs: x"]
    assert consistency.summary_line(rows, differential) == \
        "consistency: conventions agree 1 of 2; differential checks: agree 1, disagree 1"
    table = consistency.section_table(rows, differential)
    assert list(table.columns) == consistency.COLUMNS and len(table) == 4
    assert consistency.disagreements(rows[2:4], differential[:1]) == []


def test_convention_mismatch_carries_the_measurement():
    from harness.spec.conventions import ConventionMismatch, check_convention, measured_of
    with pytest.raises(ConventionMismatch) as info:
        check_convention("window_extent", "w+1", {})
    assert info.value.measured == "w+1"
    assert measured_of(check_convention("window_extent", "w", {})) == "w"
    assert measured_of("convention:nondeterministic (max spread 1e-07)") == "nondeterministic"
    assert measured_of("profile:causal") is None


def test_check_passes_require_consistent():
    import argparse
    from harness.commands import check
    parser = argparse.ArgumentParser()
    check.add_parser(parser.add_subparsers())
    args = parser.parse_args(["check", "--impl", "a", "--impl", "b", "--require-consistent"])
    assert "--require-consistent" in check.pytest_argv(args)


def _differential_row(pytester, tmp_path, source: str, suite: str, name: str) -> dict:
    """The differential row of ``name`` when reference and a target written from ``source`` are
    held to each other by ``suite`` (the session itself must pass: a disagreement is reported)."""
    target = tmp_path / "target_under_test.py"
    target.write_text(source)
    report = tmp_path / "report"
    result = run_suite(pytester, [CONSISTENCY / suite], ["reference", target], name,
                       "--conformance-report", str(report))
    assert result.ret == 0, result.stdout.str()[-3000:]
    rows = {(r["part"], r["item"]): r for r in json.loads((report / "conformance.json").read_text())["consistency"]["rows"]}
    return rows[("differential", name)]


ROTATE_HALF = '''
from harness.reference.rope import rope_math
HARNESS_CONVENTIONS = {{"rope_layout": "rotate_half"}}

def apply_rotary_embedding(x, positions, base=10000.0):
    return rope_math(x, positions, base, layout="{layout}").to(x.dtype)
'''


@pytest.mark.parametrize("layout, verdict", [("rotate_half", "agree"), ("interleaved", "disagree")])
def test_rope_pairings_are_compared_as_the_same_rotation(pytester, tmp_path, layout, verdict):
    """reference (interleaved pairs) and a target that declares rotate_half: the differential gives
    the latter the same pairs at (j, j + D/2) and reads its output back, so a correct rotate-half
    RoPE agrees (the first H200 run reported reference.triton.rope and rope_interleaved as
    disagreeing), and one that declares rotate_half but pairs (2j, 2j + 1) does not."""
    row = _differential_row(pytester, tmp_path, ROTATE_HALF.format(layout=layout),
                            "test_consistency.py", "apply_rotary_embedding")
    assert row["result"] == verdict, row


CONCATENATED = '''
from harness.reference.sinusoidal import sinusoidal_math
HARNESS_CONVENTIONS = {{"sinusoidal_layout": "concatenated"}}

def sinusoidal_position_embedding(num_positions, dim):
    pe = sinusoidal_math(num_positions, dim, "concatenated")
    return pe{bug}.float()
'''


@pytest.mark.parametrize("bug, verdict", [("", "agree"), ("[:, list(range(1, dim)) + [0]]", "disagree")],
                         ids=["concatenated", "concatenated, columns rolled"])
def test_sinusoidal_layouts_are_compared_as_the_same_table(pytester, tmp_path, bug, verdict):
    """reference (interleaved columns) and a target that declares the concatenated layout: the
    differential reads the latter's [sin ..., cos ...] as [sin w_0, cos w_0, ...], so a correct
    concatenated table agrees (a sweep of reference and x-transformers reported its table as an
    output disagreement on top of the named convention), and one whose columns are rolled does not."""
    row = _differential_row(pytester, tmp_path, CONCATENATED.format(bug=bug),
                            "test_consistency.py", "sinusoidal_position_embedding")
    assert row["result"] == verdict, row


WIDER_WINDOW = '''
from harness.reference.sliding_window import sliding_window_attention as _window
HARNESS_CONVENTIONS = {"window_extent": "w+1"}

def sliding_window_attention(query, key, value, window, scale=None):
    return _window(query, key, value, window + 1, scale)
'''


def test_an_output_disagreement_names_the_conventions_declared_differently(pytester, tmp_path):
    """reference (w keys) and a target that declares and follows w + 1: their window outputs
    differ, and the disagreement says they declare different window extents (a named difference:
    each passes its own suites), as the sweep of every control reported for HF's FA2 path."""
    row = _differential_row(pytester, tmp_path, WIDER_WINDOW, "test_consistency.py",
                            "sliding_window_attention")
    assert row["result"] == "disagree"
    assert "they declare different conventions, which may explain it: window_extent w vs w+1" in row["detail"]
