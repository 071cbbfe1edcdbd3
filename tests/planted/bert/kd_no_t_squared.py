"""Planted bug: the T^2 factor is missing.

Real pattern: Hinton et al. note that soft-target gradients scale as 1/T^2 and multiply by
T^2; implementations that drop it silently down-weight distillation as T grows. Caught by:
distillation.temperature.
Message: without the T^2 factor
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _distill_base import Distillation  # noqa: E402


class Planted(Distillation):
    def scale(self, T):
        return 1.0  # BUG: no T^2


distillation_loss = Planted().distillation_loss
