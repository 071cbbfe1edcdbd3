"""A correct target whose every backward is hand-written (``torch.autograd.Function``): float32
attention (causal, bool/float masks, GQA, scale, dropout with the forward's keep mask saved,
sliding window; P recomputed in the backward as FlashAttention does), LayerNorm, RMSNorm, a
pre-norm residual block, rotate-half RoPE and a learned position table. It must pass every
gradient property (tests/test_planted_grad.py); the planted bugs beside it each change one hook. It
declares a deterministic backward, which every gradient property then holds it to (a second forward and
backward on the same inputs, bitwise equal): the false-alarm control of that check."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import Attention, LayerNorm, LearnedPositionEmbedding, PreNormBlock, RMSNorm, Rope  # noqa: E402,F401

HARNESS_CONVENTIONS = {"backward_determinism": "deterministic"}

_attention = Attention()
scaled_dot_product_attention = _attention.scaled_dot_product_attention
sliding_window_attention = _attention.sliding_window_attention
apply_rotary_embedding = Rope().apply_rotary_embedding
residual_block = PreNormBlock
