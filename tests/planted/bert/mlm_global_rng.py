"""Planted bug: the generator argument is ignored; the global torch RNG is used.

Real pattern: ``torch.bernoulli(probs)`` without ``generator=`` (the collator's ``seed``
then does nothing): runs are not reproducible from the data seed. Caught by: mlm.generator.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _mlm_base import Masking  # noqa: E402


class Planted(Masking):
    def rng(self, generator):
        return None  # BUG: global RNG


mask_tokens = Planted().mask_tokens
