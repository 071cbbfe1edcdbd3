"""Planted bug: w_i = 10000^(+2i/d): frequencies far above pi alias, so a neighbour can
look less similar than a distant position.

Real pattern: ``div_term = torch.exp(torch.arange(0, d, 2) * (math.log(10000.0) / d))``, the
PyTorch-tutorial formula with its minus sign lost.
Caught by: sinusoidal.closeness.
"""
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Sinusoidal  # noqa: E402


class Planted(Sinusoidal):
    def omega(self, dim):
        return 10000.0 ** self.exponent(dim)  # BUG: the exponent's sign


sinusoidal_position_embedding = Planted().sinusoidal_position_embedding
