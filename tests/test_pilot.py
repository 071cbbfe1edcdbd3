from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]

def test_causal_off_by_one_caught(pytester):
    r = pytester.runpytest_inprocess(str(ROOT / "suites/test_attention_masks.py"), "--impl", str(ROOT / "tests/planted/causal_off_by_one.py"), "-k", "test_causal", "-p", "no:cacheprovider", "--hypothesis-profile", "ci")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*attention.causal*", "*repro:*"])
