"""Planted bug: YaRN's attention factor (mscale) is left out: cos and sin are not scaled.

Real pattern: engines that copy YaRN's frequencies but return 1.0 as the attention factor (or forget
to multiply cos/sin by it).
Caught by: rope_scaling.yarn
Message: yarn attention factor
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Scaling  # noqa: E402


class Planted(Scaling):
    def yarn_attention(self, s):
        return 1.0  # BUG: mscale left out


rope_frequencies = Planted().rope_frequencies
