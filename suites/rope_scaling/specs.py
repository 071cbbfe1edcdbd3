"""The scaled-RoPE names in the suites that run across names: ``rope_frequencies``' history
(``history.rope_frequencies``: a dynamic base grown for a long call must not stay) and its differential
check (several implementations of a rule held to each other: transformers' initializers, torchtune's
``Llama3ScaledRoPE``, a model's own copy; the frequencies as log-frequencies and the attention factor,
under the rule suite's yardstick).
"""
from __future__ import annotations

import dataclasses
import math

import torch

from harness.reference.rope_scaling import rope_frequencies
from harness.spec.configs import HistoryConfig
from harness.suites.consistency.differential import Case, policy
from harness.suites.kit import ImplementationError
from harness.suites.histories import History
from harness.suites.rope_scaling import test_rope_scaling as rope_scaling
from harness.suites.rope_scaling.configs import scaling_configs

#: dynamic NTK past the original length, then the same rule at the original length (run first on every
#: profile: a grown base that is kept shows at the second call)
ROPE_SCALING_HISTORY = HistoryConfig(name="rope_frequencies", calls=tuple(c.to_json() for c in (
    rope_scaling.DYNAMIC, dataclasses.replace(rope_scaling.DYNAMIC, seq_len=1024))))

HISTORIES = (
    History(name="rope_frequencies", configs=scaling_configs(), judge=rope_scaling.check_agreement,
            keep=(("rule", "dim", "partial", "base", "factor", "orig"),), vary=("seq_len",),
            explicit=(ROPE_SCALING_HISTORY,), others=" (half of them the first at another sequence length)",
            note=": a dynamic base grown for a long sequence must not stay for a shorter one"),
)


# ---- differential check ------------------------------------------------------------------------------

def _scaling_calls(cfg, device):
    return [(cfg.rule, (cfg.dim, cfg.base), {"scaling": cfg.scaling(), "seq_len": cfg.call_seq_len()})]


def _log_frequencies(out) -> torch.Tensor:
    """(inv_freq, attention_factor) as one float64 vector: the log-frequencies, then the log factor."""
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], torch.Tensor)):
        raise ImplementationError(f"returned {type(out).__name__}; expected (inv_freq, attention_factor)")
    factor = float(out[1].item() if isinstance(out[1], torch.Tensor) else out[1])
    return torch.cat([out[0].detach().cpu().double().log(), torch.tensor([math.log(factor)], dtype=torch.float64)])


def _scaling_judge(cfg, label, args, kwargs, out_dtype):
    """The rule suite's yardstick: log-frequencies (and the log attention factor) under the policy, the
    naive error that of the float64 formulas rounded to the returned dtype."""
    inv, factor = rope_frequencies(*args, **kwargs)
    truth = _log_frequencies((inv, factor))
    naive = _log_frequencies((inv.to(out_dtype).double(), torch.tensor(factor).to(out_dtype).double()))
    return _log_frequencies, policy(truth, naive, out_dtype)


#: every rule with drawn parameters, both sides of the original length: the targets' frequencies and
#: attention factors held to each other (transformers' initializers, torchtune's Llama3ScaledRoPE, ...)
CASES = {"rope_frequencies": Case(scaling_configs(), _scaling_calls, _scaling_judge)}
