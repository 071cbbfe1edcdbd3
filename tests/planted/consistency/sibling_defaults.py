"""Planted backend, held to ``reference`` (tests/test_consistency.py): one library's second path for
the norm, objective, slope and KV-cache names, each differing from the first in one way a sibling
path really does. Some of these fail a one-target suite too; here each must be found by the
differential check of its name, so every such check is shown to fail when two targets differ.

Real patterns:
- ``RMSNorm`` scales by (1 + weight), Gemma's form, where the sibling path scales by weight;
- ``LayerNorm`` drops the bias on its fused path (a kernel written for bias=False models);
- ``distillation_loss``'s default temperature is 2.0 (DistilBERT's training setting copied into
  the signature);
- ``build_inputs`` gives the final [SEP] of sentence B segment 0;
- ``alibi_slopes`` lists the slopes from the smallest;
- ``attention_with_kvcache`` takes ``cache_seqlens[0]`` for every batch item (a kernel written for
  a batch of one);
- ``attention_varlen`` aligns causal queries top-left in each sequence (torch's is_causal), where
  the sibling (FlashAttention >= 2.1) aligns them bottom-right; and so differs from dense SDPA run
  per sequence with the bottom-right mask too;
- ``build_model`` is the same encoder with the tanh approximation of GELU (``gelu_pytorch_tanh``,
  a fused kernel's choice) where the sibling uses the exact ``gelu``: same weights, other outputs;
- ``bert_embeddings`` numbers positions from 2 (RoBERTa's padding_idx + 1) where BERT starts at 0;
- ``rope_frequencies`` leaves the attention factor out (YaRN's mscale, LongRoPE's factor: 1.0 always),
  the port that copies the frequencies and forgets cos and sin are scaled.
Caught by: the consistency section (differential LayerNorm, RMSNorm, distillation_loss,
build_inputs, alibi_slopes, attention_with_kvcache, attention_varlen (and varlen against dense),
build_model, bert_embeddings, rope_frequencies).
"""
import torch

from harness import reference
from harness.reference.bert import InputEmbedding
from harness.reference.dependency_models import build_bert_like
from harness.reference.layernorm import layer_norm_math
from harness.reference.rmsnorm import rms_norm_math


class LayerNorm(reference.LayerNorm):
    def forward(self, x):
        return layer_norm_math(x, self.normalized_shape, self.weight, None, self.eps).to(x.dtype)  # BUG: no bias


class RMSNorm(reference.RMSNorm):
    def forward(self, x):
        weight = None if self.weight is None else 1 + self.weight  # BUG: Gemma's (1 + weight)
        return rms_norm_math(x, self.normalized_shape, weight, self.eps).to(x.dtype)


def distillation_loss(student_logits, teacher_logits, temperature=2.0):  # BUG: the default
    return reference.distillation_loss(student_logits, teacher_logits, temperature)


def build_inputs(tokens_a, tokens_b=None, *, cls_id=101, sep_id=102):
    ids, types = reference.build_inputs(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id)
    if tokens_b is not None:
        types = types.clone()
        types[-1] = 0  # BUG: the last [SEP] in segment A
    return ids, types


def alibi_slopes(num_heads):
    return reference.alibi_slopes(num_heads).flip(0)  # BUG: from the smallest


def attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, causal=True,
                           scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False):
    if isinstance(cache_seqlens, torch.Tensor) and cache_seqlens.numel() > 1:
        cache_seqlens = cache_seqlens[:1].expand_as(cache_seqlens).clone()  # BUG: item 0's length for all
    return reference.attention_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, window, causal, scale,
                                            rotary_cos, rotary_sin, rotary_interleaved)


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, window=None,
                     scale=None, softcap=None, sinks=None):
    if not causal:
        return reference.attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                          scale=scale, softcap=softcap, sinks=sinks)
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=q.dtype)
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for b in range(len(cq) - 1):
        if cq[b + 1] > cq[b]:
            qb, kb, vb = (t[s:e].transpose(0, 1)[None] for t, s, e in ((q, cq[b], cq[b + 1]), (k, ck[b], ck[b + 1]),
                                                                        (v, ck[b], ck[b + 1])))
            one = reference.scaled_dot_product_attention(qb, kb, vb, is_causal=True, scale=scale,  # BUG: top-left
                                                         enable_gqa=q.shape[1] != k.shape[1])
            out[cq[b]:cq[b + 1]] = one[0].transpose(0, 1)
    return out


MODEL_CLAIM = "bidirectional"


def build_model():
    return build_bert_like(hidden_act="gelu_pytorch_tanh")  # BUG: the other GELU


class _RobertaPositions(InputEmbedding):
    def forward(self, input_ids, token_type_ids=None, position_ids=None):
        if position_ids is None:  # BUG: positions from 2, as RoBERTa numbers them
            position_ids = torch.arange(input_ids.shape[-1], device=input_ids.device)[None] + 2
        return super().forward(input_ids, token_type_ids, position_ids)


def bert_embeddings(vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2):
    return _RobertaPositions(vocab_size, hidden_size, max_position_embeddings, type_vocab_size)


def rope_frequencies(dim, base=10000.0, scaling=None, seq_len=None):
    inv_freq, _ = reference.rope_frequencies(dim, base, scaling, seq_len)
    return inv_freq, 1.0  # BUG: the attention factor left out


__all__ = ["LayerNorm", "RMSNorm", "distillation_loss", "build_inputs", "alibi_slopes", "attention_with_kvcache",
           "attention_varlen", "MODEL_CLAIM", "build_model", "bert_embeddings", "rope_frequencies"]
