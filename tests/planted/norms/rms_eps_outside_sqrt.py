"""Planted bug: RMSNorm adds eps to the root mean square, outside the square root.

Real pattern: x / (sqrt(mean(x^2)) + eps), as in the RMSNorm paper's formula and kernels that
followed it (NVIDIA TransformerEngine moved eps inside to match Llama/T5 and torch).
Caught by: rmsnorm.eps (with eps=None it matches no known eps; an explicit eps is not honoured).
Message: rmsnorm_eps: the behaviour matches no known convention
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def normalize(self, h, ms, eps):
        return h / (ms.sqrt() + eps)  # BUG: eps belongs inside the square root
