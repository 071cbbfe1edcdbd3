"""Planted bug: LayerNorm normalizes each feature across the tokens (batch-norm statistics).

Real pattern: ``nn.BatchNorm1d`` (or ``mean(dim=0)``) used where a LayerNorm belongs, so the
output of a token depends on the rest of the batch (and differs between training and inference).
Caught by: layernorm.normalized_dims (changing one token changes the others).
Message: changed the output of the other tokens
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import LayerNorm as Base  # noqa: E402


class LayerNorm(Base):
    def stat_dims(self, h):
        return tuple(range(h.dim() - len(self.normalized_shape)))  # BUG: over the tokens, per feature
