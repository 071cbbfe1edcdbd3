"""The Hypothesis strategies every family's configurations share (array-api-tests'
``hypothesis_helpers``): a family's ``configs.py`` draws its seeds and dtypes from here.

This module imports only torch and Hypothesis: a target's worker imports the families'
``configs.py`` (``harness.spec.configs.load_families``), and with them this, but never the runner.
``suites.kit`` re-exports these names, so a suite file needs one import.
"""
from __future__ import annotations

import torch
from hypothesis import Phase
from hypothesis import strategies as st

#: the floating dtypes a property draws by name (``Config.torch_dtype`` maps a name to its dtype)
DTYPE = st.sampled_from(["float32", "float64", "float16", "bfloat16"])
#: a configuration's seed: every tensor of the example is built from it
SEED = st.integers(0, 2**32 - 1)
#: Hypothesis' phases without shrinking: a failing configuration is reported as drawn. For examples that
#: are large samples or models (the BERT family's, their histories) whose configuration is little more
#: than a seed: shrinking a seed means nothing, and would rerun a multi-second example hundreds of times
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


def autocast_dtypes():
    """The half dtypes a target is called under ``torch.autocast`` with: bfloat16 on the CPU
    (what CPU training uses), float16 and bfloat16 when CUDA is present."""
    return st.sampled_from(["bfloat16", "float16"] if torch.cuda.is_available() else ["bfloat16"])
