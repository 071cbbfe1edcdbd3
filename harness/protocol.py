"""The plug-in protocol: the names a target may define, and their signatures.

A target defines any subset. The suites for a missing name skip with a reason
that names the attribute. A name that exists with parameters the protocol
cannot call is reported as a broken target, not skipped.

``attention_with_kvcache`` (incremental decoding, after FlashAttention's ``flash_attn_with_kvcache``,
in the harness's head-first layout) is the one name that may modify arguments in place: it writes
the new keys/values into ``k_cache``/``v_cache`` (``guard.MUTABLE``); shapes::

    q (B, Hq, Lq, E)                     k_cache (B, Hkv, Smax, E)   v_cache (B, Hkv, Smax, Ev)
    k (B, Hkv, Lnew, E) or None          v (B, Hkv, Lnew, Ev) or None (given together)
    cache_seqlens (B,) int32/int64: the positions already filled, per batch item (not advanced
                                    by the call: the caller adds Lnew)
    rotary_cos, rotary_sin (>= max position + 1, R/2), R <= E even: RoPE on the first R dims
    out (B, Hq, Lq, Ev), in q's dtype

With n_b = cache_seqlens[b] + Lnew keys filled after the write, position p is stored in slot
p mod Smax (a linear cache when n_b <= Smax; a rolling one only with a window, which needs
Smax >= window; a key this call overwrites still counts for its own queries), and query i of item b sits at position n_b - Lq + i (bottom-right, as decoding
does); with ``causal`` it sees the keys j <= its position (all n_b keys without), with ``window``
only the last ``window`` of them (the protocol's ``w`` extent; ``w+1`` is the named convention).
Query head h reads KV head h // (Hq / Hkv). With rotary tables, new keys and the queries are
rotated at their absolute positions (``rotary_interleaved``: pairs (2i, 2i+1), else rotate-half
(i, i + R/2)) before the keys are cached; the tables need k and v.

``attention_varlen`` (training on packed documents, after FlashAttention's ``flash_attn_varlen_func``, in
its own sequence-first layout) attends within each sequence only; shapes::

    q (total_q, Hq, E)    k (total_k, Hkv, E)    v (total_k, Hkv, Ev)
    cu_seqlens_q, cu_seqlens_k (B + 1,) int32: sequence b is rows cu[b] .. cu[b + 1] - 1 (zero-length allowed)
    max_seqlen_q, max_seqlen_k: ints, the longest sequences;  sinks (Hq,) or None
    out (total_q, Hq, Ev), in q's dtype

Query i of a sequence with Lq queries and Lk keys sits at position i + Lk - Lq (bottom-right per
sequence); ``causal``, ``window`` (the protocol's ``w`` extent) and GQA as in ``attention_with_kvcache``;
``softcap`` caps the scaled scores before masking, ``sinks`` add one logit per head to the softmax's
denominator (``reference/attention_options.py``); a row that sees no key is zeros.

What each name must compute is stated in the README's "The plug-in protocol" section (the
project test checks that every signature below appears there) and checked by the suites.

``RotaryEmbedding`` is the stateful form of ``apply_rotary_embedding``, as libraries ship it
(rotary-embedding-torch's ``RotaryEmbedding.rotate_queries_or_keys(t, offset=...)``, Hugging
Face's rotary caches): constructed ONCE (in the target's worker) and called repeatedly,
``forward(x, offset)`` rotates x (B, H, L, D) as ``apply_rotary_embedding(x, offset +
arange(L), base)`` does, with either pairing (``rope_layout``), and returns x's dtype and
device. It may cache tables between calls (by length, offset, dtype, device); no call may
depend on the calls before it. The harness never casts the module's dtype (calls in several
dtypes go to the same instance) and moves it with ``.to(device)`` before calling it on
another device, as a model is moved.

``AlibiPositionalBias`` and ``T5RelativePositionBias`` are the cached forms of ``alibi_bias`` and
``t5_relative_position_bias``, as x-transformers and T5 models ship them: built once, then
``forward(query_len, key_len)`` returns the (H, query_len, key_len) bias of the last query_len
queries over key_len keys (queries aligned to the END of the keys, as in KV-cache decoding), whatever
the calls before it were. ``AlibiPositionalBias`` is compared as ``alibi_bias`` is (causal keys, up to
a per-row constant); ``T5RelativePositionBias`` reads its learned table from
``relative_attention_bias`` (an ``nn.Embedding(num_buckets, H)``, the name Hugging Face's T5Attention
and x-transformers use), which the harness overwrites between calls as a training step would: a
cache may keep bucket indices, never the table's values. Both are moved with ``.to(device)``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Name:
    name: str
    #: parameters the harness passes by keyword/position; they must be accepted
    params: tuple[str, ...]
    signature: str
    kind: str = "function"  # or "class", or "constant" (a module-level value, not called)


NAMES: dict[str, Name] = {n.name: n for n in [
    Name("scaled_dot_product_attention",
         ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"),
         "scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, "
         "is_causal=False, scale=None, enable_gqa=False)"),
    Name("sliding_window_attention", ("query", "key", "value", "window", "scale"),
         "sliding_window_attention(query, key, value, window, scale=None)"),
    Name("attention_with_kvcache",
         ("q", "k_cache", "v_cache", "k", "v", "cache_seqlens", "window", "causal", "scale",
          "rotary_cos", "rotary_sin", "rotary_interleaved"),
         "attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, "
         "causal=True, scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False) -> out"),
    Name("attention_varlen",
         ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "causal", "window",
          "scale", "softcap", "sinks"),
         "attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, "
         "window=None, scale=None, softcap=None, sinks=None) -> out"),
    Name("sinusoidal_position_embedding", ("num_positions", "dim"),
         "sinusoidal_position_embedding(num_positions, dim) -> Tensor[num_positions, dim]"),
    Name("LearnedPositionEmbedding", ("max_positions", "dim"),
         "LearnedPositionEmbedding(max_positions, dim); forward(positions: LongTensor)", kind="class"),
    Name("apply_rotary_embedding", ("x", "positions", "base"),
         "apply_rotary_embedding(x, positions, base=10000.0)"),
    Name("RotaryEmbedding", ("dim", "base"),
         "RotaryEmbedding(dim, base=10000.0); forward(x (B, H, L, D), offset=0)", kind="class"),
    Name("alibi_slopes", ("num_heads",),
         "alibi_slopes(num_heads) -> Tensor[H]"),
    Name("alibi_bias", ("num_heads", "query_len", "key_len"),
         "alibi_bias(num_heads, query_len, key_len) -> Tensor[H, Lq, Lk]"),
    Name("AlibiPositionalBias", ("num_heads",),
         "AlibiPositionalBias(num_heads); forward(query_len, key_len) -> Tensor[H, Lq, Lk]", kind="class"),
    Name("t5_relative_position_bucket", ("relative_position", "bidirectional", "num_buckets", "max_distance"),
         "t5_relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128)"),
    # table: the learned (num_buckets, H) embedding weight; queries aligned to the END of the keys (query i
    # at position key_len - query_len + i, as in KV-cache decoding); bias[h, i, j] = table[bucket(key - query), h]
    Name("t5_relative_position_bias",
         ("table", "query_len", "key_len", "bidirectional", "num_buckets", "max_distance"),
         "t5_relative_position_bias(table, query_len, key_len, bidirectional=True, num_buckets=32, "
         "max_distance=128) -> Tensor[H, query_len, key_len]"),
    Name("T5RelativePositionBias", ("num_heads", "bidirectional", "num_buckets", "max_distance"),
         "T5RelativePositionBias(num_heads, bidirectional=True, num_buckets=32, max_distance=128); "
         "forward(query_len, key_len) -> Tensor[H, Lq, Lk]; attribute relative_attention_bias "
         "(nn.Embedding(num_buckets, H))", kind="class"),
    Name("LayerNorm", ("normalized_shape", "eps", "elementwise_affine"),
         "LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)", kind="class"),
    Name("RMSNorm", ("normalized_shape", "eps", "elementwise_affine"),
         "RMSNorm(normalized_shape, eps=None, elementwise_affine=True)", kind="class"),
    Name("residual_block", ("dim", "sublayer"),
         "residual_block(dim, sublayer) -> nn.Module; forward(x (..., dim))"),
    Name("mask_tokens",
         ("input_ids", "vocab_size", "mask_token_id", "special_tokens_mask", "mlm_probability", "generator"),
         "mask_tokens(input_ids, *, vocab_size, mask_token_id, special_tokens_mask=None, "
         "mlm_probability=0.15, generator=None) -> (inputs, labels)"),
    Name("distillation_loss", ("student_logits", "teacher_logits", "temperature"),
         "distillation_loss(student_logits, teacher_logits, temperature=1.0)"),
    Name("span_corruption", ("tokens", "sentinel_ids", "noise_density", "mean_span_length", "generator"),
         "span_corruption(tokens, *, sentinel_ids, noise_density=0.15, mean_span_length=3.0, "
         "generator=None) -> (inputs, targets)"),
    Name("build_model", (),
         "build_model() -> nn.Module; forward(inputs_embeds (B, L, D)) -> (B, L, H); attribute embed_dim = D"),
    Name("MODEL_CLAIM", (),
         "MODEL_CLAIM = 'bidirectional' | 'causal' | 'concat_unidirectional'",
         kind="constant"),
    Name("build_bert", ("size", "add_pooling_layer"),
         "build_bert(size='base', add_pooling_layer=True) -> nn.Module"),
    Name("bert_embeddings", ("vocab_size", "hidden_size", "max_position_embeddings", "type_vocab_size"),
         "bert_embeddings(vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2) -> nn.Module; "
         "forward(input_ids, token_type_ids=None, position_ids=None) -> (B, L, hidden_size)"),
    Name("build_inputs", ("tokens_a", "tokens_b", "cls_id", "sep_id"),
         "build_inputs(tokens_a, tokens_b=None, *, cls_id=101, sep_id=102) -> (input_ids, token_type_ids)"),
    Name("make_nsp_pairs", ("documents", "num_pairs", "generator"),
         "make_nsp_pairs(documents, num_pairs, *, generator=None) -> [(sentence_a, sentence_b, label)]"),
]}


def signature_problem(name: str, obj: object) -> str | None:
    """Why ``obj`` cannot serve as protocol name ``name``, or None.

    Builtins without an introspectable signature (torch's C functions) pass:
    their behaviour is what the suites check.
    """
    entry = NAMES.get(name)
    if entry is None:
        return None
    if entry.kind == "class" and not isinstance(obj, type):
        return f"expected a class ({entry.signature}), got {type(obj).__name__}"
    if entry.kind == "function" and not callable(obj):
        return f"expected a callable ({entry.signature}), got {type(obj).__name__}"
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = sig.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return None
    missing = [p for p in entry.params if p not in params]
    if missing:
        return (f"signature {sig} lacks parameter(s) {', '.join(missing)}; "
                f"the protocol calls {entry.signature}")
    return None
