"""Planted bug: the loss is summed over the rows instead of averaged.

Real pattern: ``kl_div(..., reduction="sum")`` without dividing by the number of rows: the
loss (and the learning rate it implies) grows with batch size and sequence length. Caught by:
distillation.reduction.
Message: the sum over rows
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def reduce(self, total, rows, lead_shape):
        return total  # BUG: sum


distillation_loss = Planted().distillation_loss
