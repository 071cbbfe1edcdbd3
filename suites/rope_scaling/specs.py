"""The scaled-RoPE names in the suites that run across names: ``rope_frequencies``' history
(``history.rope_frequencies``: a dynamic base grown for a long call must not stay). It has no
differential check (its record says why: ``rope_scaling.agreement`` holds every target to the float64
formulas, which is what a comparison between targets would hold them to).
"""
from __future__ import annotations

import dataclasses

from harness.spec.configs import HistoryConfig
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
