"""Planted bug: random replacements drawn from beyond the model's vocabulary.

Real pattern: ``randint(len(tokenizer))`` after tokens were added to the tokenizer but not to
the model (``len(tokenizer) > config.vocab_size``): ids past the embedding table, an index
error or garbage at train time. Caught by: mlm.replacement_split.
Message: outside the vocabulary
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import torch  # noqa: E402

from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def random_ids(self, shape, vocab_size, g):
        return torch.randint(vocab_size + 100, shape, generator=g)  # BUG: 100 added tokens


mask_tokens = Planted().mask_tokens
