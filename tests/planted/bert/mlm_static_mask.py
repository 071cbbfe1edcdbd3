"""Planted bug: static masking: the same batch is always masked the same way.

Real pattern: masks computed once in preprocessing and cached (BERT's original pipeline,
which RoBERTa replaced with dynamic masking), here a cache keyed by the batch content.
Caught by: mlm.dynamic_masking.
Message: static masking
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def __init__(self):
        self.cache = {}

    def mask_tokens(self, input_ids, **kw):
        key = (input_ids.numpy().tobytes(), input_ids.shape)
        if key not in self.cache:  # BUG: the first mask is reused forever
            self.cache[key] = super().mask_tokens(input_ids, **kw)
        inputs, labels = self.cache[key]
        return inputs.clone(), labels.clone()


mask_tokens = Planted().mask_tokens
