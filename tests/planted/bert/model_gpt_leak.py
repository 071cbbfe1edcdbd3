"""Planted bug: a "GPT" decoder that leaks the future.

Real pattern: the language-model shift applied to the inputs instead of the labels (or a
causal mask built with ``torch.triu(..., diagonal=2)``): position i then reads token i + 1,
the very token it is trained to predict. Caught by: models.dependency.
Message: none of bidirectional/causal/concat_unidirectional
"""
import torch
from torch import nn

from harness.reference.dependency_models import build_gpt_like

MODEL_CLAIM = "causal"


class ShiftedInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = build_gpt_like()
        self.embed_dim = self.inner.embed_dim

    def forward(self, inputs_embeds):
        # BUG: shift left by one (pad at the end): output i is computed from inputs 1 .. i + 1
        shifted = torch.cat([inputs_embeds[:, 1:], torch.zeros_like(inputs_embeds[:, :1])], dim=1)
        return self.inner(shifted)


def build_model():
    return ShiftedInputs()
