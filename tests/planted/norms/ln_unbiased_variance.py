"""Planted bug: LayerNorm divides the squared deviations by n - 1 (unbiased variance).

Real pattern: ``x.var(-1, keepdim=True)`` / ``x.std(-1)``: torch.var and torch.std apply
Bessel's correction by default (numpy does not), as in the Annotated Transformer's LayerNorm.
Caught by: layernorm.standardized (the output variance is (n-1)/n, not 1).
Message: the unbiased variance was used
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def variance(self, h, mean, dims):
        return h.var(dim=dims, keepdim=True)  # BUG: unbiased by default; should be the biased variance
