"""Planted bug: unselected positions get label 0 instead of -100.

Real pattern: labels built with ``torch.zeros_like`` and filled at the selected positions;
0 is a real token id ([PAD]), so the loss trains every position to predict [PAD]. Caught by:
mlm.labels.
Message: neither -100 nor the original id
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def labels(self, input_ids, selected):
        return torch.where(selected, input_ids, torch.zeros_like(input_ids))  # BUG: 0, not -100


mask_tokens = Planted().mask_tokens
