"""Planted bug: RMSNorm with eps=None uses a fixed 1e-6 and does not declare it.

Real pattern: Llama's ``RMSNorm(dim, eps=1e-6)`` default copied into a module that claims
torch.nn.RMSNorm's constructor (eps=None means finfo(dtype).eps there).
Caught by: rmsnorm.eps (measured rmsnorm_eps: fixed; the protocol default is finfo).
Message: convention mismatch
Message: rmsnorm_eps: the code follows fixed
Message: HARNESS_CONVENTIONS
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def default_eps(self, x, h):
        return 1e-6  # BUG (undeclared): a named convention, declare HARNESS_CONVENTIONS rmsnorm_eps=fixed
