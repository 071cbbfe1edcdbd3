"""Planted bug: RMSNorm takes the mean square over the last dim only, whatever normalized_shape says.

Real pattern: Llama-style ``RMSNorm(hidden_size)`` code (``mean(-1)``) reused with a multi-dim
normalized_shape, e.g. a per-head (H, D) query/key norm meant to span both dims.
Caught by: rmsnorm.normalized_dims (a change in another row of the token is not felt).
Message: must span all of normalized_shape
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def stat_dims(self, h):
        return (h.dim() - 1,)  # BUG: should span all of normalized_shape
