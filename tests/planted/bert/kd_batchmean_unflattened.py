"""Planted bug: ``batchmean`` on the unflattened (B, S, V) logits: divided by B only.

Real pattern: ``kl_div(log_p_student, p_teacher, reduction="batchmean")`` on 3-D token logits;
torch's batchmean divides by input.size(0) = B, so the loss is the sum over the S positions
of each sequence. DistilBERT flattens to (B*S, V) first. Caught by: distillation.reduction.
Message: batch size B only
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def reduce(self, total, rows, lead_shape):
        return total / lead_shape[0]  # BUG: / B, not / (B * S)


distillation_loss = Planted().distillation_loss
