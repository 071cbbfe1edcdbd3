"""Planted bug: every position keeps its label.

Real pattern: ``labels = input_ids.clone()`` with the ``labels[~masked] = -100`` line
forgotten: the model is trained to copy its unmasked input. Caught by: mlm.labels.
Message: has a label
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def labels(self, input_ids, selected):
        return input_ids.clone()  # BUG: no -100 off the selection


mask_tokens = Planted().mask_tokens
