"""Planted bug: the sink logit is multiplied by the softmax scale like a score.

Real pattern: the sink concatenated to the raw q.k columns before the scale is applied (the
learned logit is already in score units). Caught by: varlen.sinks.
Message: sinks
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Varlen  # noqa: E402


class Planted(Varlen):
    def sink_logit(self, sinks, scale):
        return sinks * scale  # BUG: scaled like q.k


attention_varlen = Planted().attention_varlen
