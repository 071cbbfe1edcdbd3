"""Control (not a bug): a correct bottom-right causal kernel whose rows with no visible key are NaN.

Real pattern: FlashAttention >= 2.1 / KV-cache decoding align the causal mask to the end of the
keys (query i sees j <= i + S - L), and a plain softmax over -inf leaves the first L - S queries
NaN when L > S (``fully_masked_rows: nan``). Its backward (hand-written, P recomputed) is right.
attention_grad.gradcheck must not call it a bug: it draws is_causal with L <= S (as
attention_grad.causal does), where every query sees a key.
Passes: every attention_grad property (causal_alignment declared bottom_right).
"""
import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention  # noqa: E402

HARNESS_CONVENTIONS = {"causal_alignment": "bottom_right", "fully_masked_rows": "nan"}


class BottomRight(Attention):
    def causal_visible(self, L, S, device):
        return torch.arange(S, device=device)[None, :] <= torch.arange(L, device=device)[:, None] + (S - L)

    def normalize(self, w):
        """The plain softmax: a row with no visible key is 0 / 0 = NaN."""
        return w / w.sum(-1, keepdim=True)


scaled_dot_product_attention = BottomRight().scaled_dot_product_attention
