"""Hugging Face transformers' position encodings under the harness protocol names.

    --impl harness.adapters.hf_positions

- ``apply_rotary_embedding``: Llama's ``LlamaRotaryEmbedding`` (cos/sin from float32
  angles, cast to x's dtype) + ``apply_rotary_pos_emb`` (rotate-half pairs (i, i + D/2)).
- ``alibi_slopes`` / ``alibi_bias``: Bloom's ``build_alibi_tensor``, which returns
  slope_h * j for every key j, one row shared by every query (correct up to the
  per-row constant softmax ignores); the slopes are its value at j = 1. ``shard=(h0, h1)``
  (a tensor-parallel rank's heads): the H-head model's tensor sliced to rows h0 .. h1 - 1, as sharded
  serving code builds a rank's bias from Bloom's function (it has no shard argument of its own).
- ``t5_relative_position_bucket``: ``T5Attention._relative_position_bucket``.
- ``t5_relative_position_bias``: ``T5Attention.compute_bias(Lq, Lk, past_seen_tokens=Lk - Lq)``
  (how T5 decodes with a cache) of a T5Attention whose relative_attention_bias weight is the
  table; ``is_decoder = not bidirectional``. ``T5RelativePositionBias`` (the module form): that
  T5Attention kept, its ``relative_attention_bias`` the module's table.
- ``sinusoidal_position_embedding``: DistilBERT's ``create_sinusoidal_embeddings``
  (interleaved columns, computed in NumPy float64, stored as float32).

Raises ImportError at import when transformers is not installed.
"""
from __future__ import annotations

from functools import lru_cache

import torch

try:
    import transformers
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.distilbert.modeling_distilbert import create_sinusoidal_embeddings
    from transformers.models.llama.configuration_llama import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    from transformers.models.t5.configuration_t5 import T5Config
    from transformers.models.t5.modeling_t5 import T5Attention
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"harness.adapters.hf_positions needs transformers (pip install transformers): {exc}") from exc

__version__ = transformers.__version__

HARNESS_CONVENTIONS = {"rope_layout": "rotate_half", "sinusoidal_layout": "interleaved"}

#: Llama's rotary embedding computes the angles in float32 whatever x's dtype (cos/sin are then
#: cast to it), so a float64 input gets float32-accurate angles: float64 is not declared.
HARNESS_DTYPES = ("float32", "float16", "bfloat16")


@lru_cache(maxsize=16)
def _rotary(dim: int, base: float) -> LlamaRotaryEmbedding:
    config = LlamaConfig(hidden_size=dim, num_attention_heads=1, head_dim=dim,
                         rope_parameters={"rope_type": "default", "rope_theta": float(base)})
    return LlamaRotaryEmbedding(config)


def apply_rotary_embedding(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """x (B, H, L, D), positions (L,) or (B, L): Llama's rotary embedding applied to x as the query."""
    rotary = _rotary(x.shape[-1], float(base)).to(x.device)
    position_ids = positions[None] if positions.dim() == 1 else positions  # (1 or B, L)
    with torch.no_grad():  # as in Llama: the cos/sin tables carry no gradient, the rotation of x does
        cos, sin = rotary(x, position_ids)  # (1 or B, L, D) in x's dtype
    q, _ = apply_rotary_pos_emb(x, x, cos, sin)  # unsqueeze_dim=1: heads at dim 1
    return q


def _heads(shard, num_heads: int) -> slice:
    return slice(0, num_heads) if shard is None else slice(int(shard[0]), int(shard[1]))


def alibi_slopes(num_heads: int, shard=None) -> torch.Tensor:
    """(H,): Bloom's bias at key j = 1 is slope_h * 1 (the shard's rows of it)."""
    alibi = build_alibi_tensor(torch.ones(1, 2, dtype=torch.long), num_heads, torch.float32)
    return alibi[_heads(shard, num_heads), 0, 1]


def alibi_bias(num_heads: int, query_len: int, key_len: int, shard=None) -> torch.Tensor:
    """(H, Lq, Lk): Bloom's (H, 1, Lk) row slope_h * j, the same for every query (the shard's heads)."""
    alibi = build_alibi_tensor(torch.ones(1, key_len, dtype=torch.long), num_heads, torch.float32)
    alibi = alibi[_heads(shard, num_heads)]
    return alibi.expand(alibi.shape[0], query_len, key_len)


def t5_relative_position_bucket(relative_position: torch.Tensor, bidirectional: bool = True,
                                num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    return T5Attention._relative_position_bucket(relative_position, bidirectional=bidirectional,
                                                 num_buckets=num_buckets, max_distance=max_distance)


def t5_relative_position_bias(table: torch.Tensor, query_len: int, key_len: int, bidirectional: bool = True,
                              num_buckets: int = 32, max_distance: int = 128) -> torch.Tensor:
    """(H, Lq, Lk) from a (num_buckets, H) table: the queries are the last Lq positions."""
    attn = _t5_attention(table.shape[1], bidirectional, num_buckets, max_distance).to(table.device, table.dtype)
    with torch.no_grad():
        attn.relative_attention_bias.weight.copy_(table)
        return attn.compute_bias(query_len, key_len, device=table.device, past_seen_tokens=key_len - query_len)[0]


def _t5_attention(heads: int, bidirectional: bool, num_buckets: int, max_distance: int) -> T5Attention:
    config = T5Config(d_model=heads, d_kv=1, num_heads=heads, relative_attention_num_buckets=num_buckets,
                      relative_attention_max_distance=max_distance, is_decoder=not bidirectional)
    return T5Attention(config, has_relative_attention_bias=True)


class T5RelativePositionBias(torch.nn.Module):
    """A T5Attention's bias: ``forward(Lq, Lk)`` is ``compute_bias(Lq, Lk, past_seen_tokens=Lk - Lq)``."""

    def __init__(self, num_heads: int, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.attn = _t5_attention(num_heads, bidirectional, num_buckets, max_distance)
        self.relative_attention_bias = self.attn.relative_attention_bias

    def forward(self, query_len: int, key_len: int) -> torch.Tensor:
        device = self.relative_attention_bias.weight.device
        return self.attn.compute_bias(query_len, key_len, device=device, past_seen_tokens=key_len - query_len)[0]


def sinusoidal_position_embedding(num_positions: int, dim: int) -> torch.Tensor:
    """(num_positions, dim) float32, as DistilBERT fills its position table."""
    out = torch.empty(num_positions, dim)
    create_sinusoidal_embeddings(num_positions, dim, out)
    return out.detach()
