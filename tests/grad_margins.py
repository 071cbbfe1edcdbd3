"""The margins (error / allowed) of the planted gradient bugs whose property compares with the
tolerance policy, replayed in-process at fixed configurations (one per dtype): what
tests/test_tolerance.py shows and bounds. A margin > 1 is a failure, i.e. the bug is caught."""
from __future__ import annotations

import re
from pathlib import Path

from harness import runner
from harness.spec import tolerance
from harness.commands.repro import load_check
from harness.boundary.loader import load_target
from harness.suites.attention.configs import AttnConfig, WindowConfig
from harness.suites.norms.configs import NormConfig

ROOT = Path(__file__).resolve().parents[1]
PLANTED = ROOT / "tests" / "planted" / "grad"
DTYPES = ("float32", "float16", "bfloat16")


def attn(dtype, **kw):
    return AttnConfig(**{"batch": (2,), "hq": 2, "hkv": 2, "L": 17, "S": 23, "E": 16, "Ev": 16, "dtype": dtype,
                         "seed": 3, **kw})


def window(dtype):
    return WindowConfig(batch=(2,), hq=2, hkv=2, L=17, S=23, E=16, Ev=16, dtype=dtype, seed=3, window=5)


def norm(dtype):
    return NormConfig(lead=(2, 5), normalized_shape=(16,), dtype=dtype, eps=1e-5, affine=True, log2_scale=0, seed=3)


ATT, NRM, WIN = "suites/attention/test_attention_grad.py", "suites/norms/test_norm_grad.py", \
    "suites/attention/test_window_grad.py"
#: (planted bug, its property's check, the config for a dtype)
CASES = [
    ("attn_dq_without_scale.py", f"{ATT}::check_agreement", attn),
    ("attn_dk_without_scale.py", f"{ATT}::check_scale", attn),
    ("attn_softmax_no_rowsum.py", f"{ATT}::check_value_shift", attn),
    ("attn_float_mask_ignored_in_backward.py", f"{ATT}::check_float_mask", attn),
    ("attn_gqa_first_head_only.py", f"{ATT}::check_gqa", lambda dt: attn(dt, hq=4)),
    ("window_dv_ignores_window.py", f"{WIN}::check_agreement", window),
    ("ln_dweight_unnormalized.py", f"{NRM}::check_layernorm", norm),
    ("ln_no_mean_term.py", f"{NRM}::check_shift_invariance", norm),
    ("rms_constant_rms.py", f"{NRM}::check_rmsnorm", norm),
]

_NUM = r"([0-9.]+e[+-][0-9]+|inf|nan)"
_PATTERNS = [rf"max error {_NUM}.*? vs allowed {_NUM}", rf"differs by {_NUM} \(allowed {_NUM}\)",
             rf"sums to (-?[0-9.e+-]+) over .*?allowed {_NUM}"]


def margin_of(message: str) -> float:
    """error / allowed of the first comparison a failure message names."""
    for pattern in _PATTERNS:
        m = re.search(pattern, message, re.S)
        if m:
            return abs(float(m.group(1))) / float(m.group(2))
    raise ValueError(f"no error / allowed in: {message[:300]}")


def margin(bug: str, check: str, cfg, c_terms: float | None = None) -> float:
    """The bug's margin at ``cfg`` (0 when the property passes); ``c_terms``: C_TERMS for the run
    (0: the policy without the cancellation term)."""
    saved = tolerance.C_TERMS
    if c_terms is not None:
        tolerance.C_TERMS = c_terms
    try:
        target = load_target(str(PLANTED / bug), isolation="none")
        runner.run(target, load_check(check), cfg)
        return 0.0
    except runner.PropertyFailure as exc:
        return margin_of(str(exc))
    finally:
        tolerance.C_TERMS = saved


if __name__ == "__main__":
    for bug, check, make in CASES:
        print(f"{bug:42s}", "  ".join(f"{dt}: {margin(bug, check, make(dt), 0.0):9.3g} -> "
                                      f"{margin(bug, check, make(dt)):9.3g}" for dt in DTYPES))
