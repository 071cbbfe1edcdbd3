"""Planted bug: RMSNorm computes the mean square in the input dtype (no upcast).

Real pattern: ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`` without ``.float()``:
x^2 overflows float16 for |x| > 256, the mean square is inf and the output 0 (Hugging Face's
LlamaRMSNorm upcasts to float32 exactly for this).
Caught by: rmsnorm.large_values (float16 inputs with |x| >= 300).
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import RMSNorm as Base  # noqa: E402


class RMSNorm(Base):
    def compute_dtype(self, x):
        return x.dtype  # BUG: half inputs need a float32 mean square
