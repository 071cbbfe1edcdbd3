"""Control (not a bug): the fixed eps=None default of 1e-6, declared as the named convention.

Real pattern: Llama / T5 / Gemma RMSNorms (eps=1e-6).
Passes: rmsnorm.eps with the label convention:fixed.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402

HARNESS_CONVENTIONS = {"rmsnorm_eps": "fixed"}


class RMSNorm(Base):
    def default_eps(self, x, h):
        return 1e-6
