"""Planted bug: YaRN takes its factor from the model config's max_position_embeddings /
original_max_position_embeddings although the scaling names an explicit factor.

Real pattern: DeepSeek-V3-style code (and early ports of it) derive the factor from the two config
lengths, silently replacing the explicit ``factor`` whenever a checkpoint's config does not keep
them in that ratio.
Caught by: rope_scaling.agreement
Message: yarn frequencies
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def yarn_factor(self, s):
        if s.get("max_position_embeddings"):  # BUG: the config ratio replaces the explicit factor
            return s["max_position_embeddings"] / s["original_max_position_embeddings"]
        return s["factor"]


rope_frequencies = Planted().rope_frequencies
