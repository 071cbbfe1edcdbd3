"""The plug-in protocol: ONE record (``Name``) per name a target may define, and every table of
per-name facts derived from the records.

A target defines any subset. The suites for a missing name skip with a reason
that names the attribute. A name that exists with parameters the protocol
cannot call is reported as a broken target, not skipped.

A record holds everything the harness knows about its name (fields in ``Name``)::

    Name("alibi_bias", family="positions", reference="harness.reference.alibi",
         signature="alibi_bias(num_heads, query_len, key_len) -> Tensor[H, Lq, Lk]",
         compared=TOLERANCE + " on the causal keys, up to the per-row constant softmax ignores"),

Derived from them (never written anywhere else): ``NAMES``, ``Name.params`` (parsed from the
signature, what ``signature_problem`` requires), ``guard.MUTABLE`` (``writes``), ``guard.NO_ALIAS``
(``new_memory``), ``declarations.FEATURES`` (``features``, plus the features no one name owns:
autocast, backward, dtypes), ``suites/consistency/``'s ``NOT_COMPARED`` (the families' ``CASES``
must hold exactly the names with ``compared``) and docs/protocol.md's table (``signature`` and
``contract``; ``scripts/gen_property_docs.py`` writes it). The record type and the signature reader
are ``harness/spec/name_record.py``'s, re-exported here. ``tests/test_protocol_records.py`` fails when a
name lacks a part: its reference, a property in ``suites/<family>/``, a planted bug, its row in
README.md / docs/*.md, or when a documented signature's parameters differ from the record's.
Adding a name: "the recipe for adding a protocol name" in notes/ARCHITECTURE.md.

What each name must compute is its record's ``contract`` (docs/protocol.md's table, generated from the
records: the shapes, slots and paged layout of ``attention_with_kvcache``, the packed layout of
``attention_varlen``, what the stateful forms ``RotaryEmbedding``, ``AlibiPositionalBias`` and
``T5RelativePositionBias`` may cache and must not) and checked by the suites. ``attention_with_kvcache``
is the one name that may modify arguments in place (its record's ``writes``: the two caches). A module
name whose tensors the harness writes or reads (a norm's weight, a learned table) says where in
``tensors`` (``harness/boundary/module_tensors.py`` follows it).
"""
from __future__ import annotations

import inspect

from harness.spec.name_record import Name, params_of

__all__ = ["Name", "params_of", "RECORDS", "NAMES", "FAMILIES", "FEATURES", "MUTABLE", "NO_ALIAS", "TENSORS", "TENSORS_NAMED_AS",
           "NOT_COMPARED", "COMPARED",
           "signature_problem", "lacking_features"]

#: how most names are compared in the consistency section: two outputs that are each within the
#: tolerance policy of the float64 reference are within twice its allowance of each other
TOLERANCE = "outputs within twice the tolerance policy's allowance"
#: one feature two records share (a feature's description is the same in every record naming it)
GQA = "GQA / MQA (fewer KV heads than query heads)"
#: the kernel options of issue 24 (reference/attention_options.py), shared by the names that take them
SOFTCAP = "softcap (scores <- softcap * tanh(scores / softcap), Gemma 2)"
SINKS = "sinks (one logit per query head in the softmax's denominator, gpt-oss)"


RECORDS: tuple[Name, ...] = (
    # ---- attention ------------------------------------------------------------------------------
    Name("scaled_dot_product_attention", family="attention", reference="harness.reference.attention",
         signature="scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, "
                   "is_causal=False, scale=None, enable_gqa=False)",
         new_memory=True,
         features={"attn_mask": "an explicit attn_mask (boolean or float)", "dropout": "dropout_p > 0",
                   "is_causal": "is_causal=True", "enable_gqa": GQA, "scale": "an explicit scale"},
         compared=TOLERANCE + " (default arguments, and is_causal=True)",
         contract="exactly `torch.nn.functional.scaled_dot_product_attention`'s contract: query `(..., Hq, L, "
                  "E)`, key/value `(..., Hkv, S, E|Ev)`; boolean mask True = may attend; a float mask is added "
                  "to the scores; with `enable_gqa`, query head h uses KV head h // (Hq / Hkv). `--impl "
                  "torch.nn.functional` passes as is."),
    Name("sliding_window_attention", family="attention", reference="harness.reference.sliding_window",
         signature="sliding_window_attention(query, key, value, window, scale=None)",
         new_memory=True, compared=TOLERANCE + " (default scale)",
         contract="causal local attention: with queries aligned to the end of the keys, the query at absolute "
                  "position i sees exactly the keys j with i − window < j ≤ i."),
    Name("chunked_attention", family="attention", reference="harness.reference.chunked_attention",
         signature="chunked_attention(query, key, value, chunk, scale=None)",
         new_memory=True, compared=TOLERANCE + " (default scale)",
         contract="chunked local attention (Llama 4's `attention_chunk_size`): the keys cut into chunks of "
                  "`chunk` positions; with queries aligned to the end of the keys, the query at absolute position "
                  "p sees exactly the keys j ≤ p with j // chunk = p // chunk (one key at a chunk's start; never "
                  "a key of an earlier chunk: not a sliding window)."),
    Name("attention_with_kvcache", family="kvcache", reference="harness.reference.kvcache",
         signature="attention_with_kvcache(q, k_cache, v_cache, k=None, v=None, cache_seqlens=None, window=None, "
                   "causal=True, scale=None, rotary_cos=None, rotary_sin=None, rotary_interleaved=False, "
                   "block_table=None, softcap=None, sinks=None, chunk=None) -> out",
         writes=("k_cache", "v_cache"), new_memory=True,
         features={"enable_gqa": GQA, "kvcache_window": "a window (a rolling cache) in attention_with_kvcache",
                   "kvcache_rotary": "rotary_cos/rotary_sin (RoPE applied inside attention_with_kvcache)",
                   "kvcache_paged": "a paged cache (block_table) in attention_with_kvcache",
                   "softcap": SOFTCAP, "sinks": SINKS,
                   "kvcache_chunked": "chunk (chunked local attention, Llama 4) in attention_with_kvcache"},
         options={"block_table": "kvcache_paged", "softcap": "softcap", "sinks": "sinks", "chunk": "kvcache_chunked"},
         compared=TOLERANCE + " (one call on ragged cache_seqlens; each target writes its own caches; the same "
                              "logical contents in a paged pool, held to the first target's linear call)",
         contract="incremental decoding, FlashAttention's `flash_attn_with_kvcache` in the harness's head-first "
                  "layout: q `(B, Hq, Lq, E)`, caches `(B, Hkv, Smax, E|Ev)`, new k/v `(B, Hkv, Lnew, E|Ev)`, "
                  "`cache_seqlens` `(B,)` ints (or one int): the positions already cached per item, not "
                  "advanced by the call. The new k/v are written **in place** into the caches at slots "
                  "`cache_seqlens[b]` … (position p in slot p mod Smax: a linear cache, or with a window a "
                  "rolling one of Smax ≥ window slots, where a key this call overwrites still counts for its "
                  "own queries); query i of item b is at position `cache_seqlens[b] + "
                  "Lnew − Lq + i` (bottom-right) and sees the keys up to it (`causal`; every filled key "
                  "without), with `window` only the last `window` of them (`window_extent`); GQA as SDPA; with "
                  "RoPE tables `(positions, R/2)` the queries and new keys are rotated at their absolute "
                  "positions over the first R dims (`rotary_interleaved`: pairs (2i, 2i+1), else rotate-half) "
                  "before the keys are cached (the tables need k and v). The only name allowed to modify "
                  "arguments (the two caches); out "
                  "`(B, Hq, Lq, Ev)`. Paged (`block_table` `(B, max_blocks)` int32, FlashAttention's "
                  "`block_table`): the caches are a pool `(num_blocks, Hkv, block_size, E|Ev)` and position p "
                  "of item b lives in block `block_table[b, p // block_size]` at slot `p % block_size` (no "
                  "rolling; items may share a prefix's blocks; a call writes only its new positions). `softcap` "
                  "(> 0: scaled scores ← softcap · tanh(scores / softcap), before masking) and `sinks` (`(Hq,)` "
                  "float32, one logit per query head in the softmax's denominator only). `chunk` (Llama 4's "
                  "`attention_chunk_size`, causal): the query at position p sees only the keys j ≤ p with "
                  "j // chunk = p // chunk, positions counted from the start of the sequence (not of the call). "
                  "The four are optional: a target declares `kvcache_paged`, `softcap`, `sinks`, "
                  "`kvcache_chunked` unsupported, or its function lacks the parameter (the same)."),
    Name("attention_varlen", family="attention", reference="harness.reference.attention_varlen",
         signature="attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, "
                   "window=None, scale=None, softcap=None, sinks=None, chunk=None) -> out",
         new_memory=True,
         features={"is_causal": "is_causal=True", "enable_gqa": GQA, "varlen_window": "a window in attention_varlen",
                   "softcap": SOFTCAP, "sinks": SINKS,
                   "varlen_chunked": "chunk (chunked local attention, Llama 4) in attention_varlen"},
         options={"chunk": "varlen_chunked"},
         compared=TOLERANCE + " (packed sequences, causal or not, GQA; and each target's SDPA run per sequence)",
         contract="packed sequences, FlashAttention's `flash_attn_varlen_func` in its own layout: q `(total_q, "
                  "Hq, E)`, k/v `(total_k, Hkv, E|Ev)`, `cu_seqlens_q`/`cu_seqlens_k` `(B + 1,)` int32 "
                  "(sequence b is rows `cu[b]` … `cu[b+1] − 1`; zero-length sequences allowed), `max_seqlen_*` "
                  "the longest lengths. Each query attends only to its own sequence's keys; query i of a "
                  "sequence with Lq queries and Lk keys sits at i + Lk − Lq (bottom-right **per sequence**); "
                  "`causal`, `window` (`window_extent`) and GQA as `attention_with_kvcache`; `softcap` caps the "
                  "scaled scores before masking (softcap · tanh(s / softcap), Gemma 2), `sinks` `(Hq,)` add one "
                  "logit per head to the softmax's denominator (gpt-oss; `reference/attention_options.py`); `chunk` "
                  "(Llama 4's `attention_chunk_size`) keeps a query to the keys of its own chunk, j // chunk = "
                  "position // chunk, positions counted from each sequence's start (a packed document's chunks "
                  "restart with it; optional: `varlen_chunked`, or no such parameter); a "
                  "row with no visible key is zeros; out `(total_q, Hq, Ev)`."),
    # ---- latent attention -----------------------------------------------------------------------
    Name("mla_decode", family="mla", reference="harness.reference.mla",
         signature="mla_decode(q, kv_cache, cache_seqlens, head_dim_v, block_table=None, scale=None, causal=True) "
                   "-> out",
         new_memory=True,
         features={"mla_paged": "a paged latent cache (block_table) in mla_decode",
                   "mla_kv_heads": "several latent heads (Hkv > 1, shared GQA-style) in mla_decode"},
         options={"block_table": "mla_paged"},
         compared=TOLERANCE + " (one call over ragged linear latent caches)",
         contract="multi-head latent attention (DeepSeek-V2/V3's MLA) in its decode-kernel form, FlashMLA's "
                  "`flash_mla_with_kvcache` (the output; its layout, the block table optional): q `(B, Lq, Hq, D)`, "
                  "D = Dc + Dr, the absorbed query (latent part, then the rotated RoPE part); `kv_cache` `(B, Smax, "
                  "Hkv, D)`, the normalised latent c then the rotated k_pe, shared by all query heads (Hkv = 1 in "
                  "DeepSeek; else head h reads latent head h // (Hq / Hkv)); `cache_seqlens` `(B,)` int32, the filled "
                  "positions **including** the Lq new tokens (the caller wrote them; nothing is written); the values "
                  "are `kv_cache[..., :head_dim_v]`; `scale` defaults to D^-0.5 (FlashMLA's; DeepSeek passes "
                  "(d_nope + Dr)^-0.5); `causal`: query i of item b at position cache_seqlens[b] − Lq + i sees the "
                  "keys up to it, else every filled key; out `(B, Lq, Hq, head_dim_v)`. Paged (`block_table` "
                  "`(B, max_blocks)` int32): a pool `(num_blocks, block_size, Hkv, D)`, position p of item b in "
                  "block `block_table[b, p // block_size]` at slot `p % block_size`. Absorbed form: with DeepSeek's "
                  "W_UK, W_UV, q = [W_UK^T q_nope ; q_pe] and out projected by W_UV equal attention over keys "
                  "[W_UK c ; k_pe] and values W_UV c. A target declares `mla_paged` (or lacks `block_table`) and "
                  "`mla_kv_heads` unsupported."),
    # ---- positions ------------------------------------------------------------------------------
    Name("sinusoidal_position_embedding", family="positions", reference="harness.reference.sinusoidal",
         signature="sinusoidal_position_embedding(num_positions, dim) -> Tensor[num_positions, dim]",
         compared=TOLERANCE + " (each table read in the interleaved frame: a declared layout is no disagreement)",
         contract="Vaswani et al.: PE(m, 2i) = sin(m w_i), PE(m, 2i+1) = cos(m w_i), w_i = 10000^(-2i/d)."),
    Name("LearnedPositionEmbedding", family="positions", reference="harness.reference.learned_positions", kind="class",
         signature="LearnedPositionEmbedding(max_positions, dim); forward(positions: LongTensor)",
         not_compared="a learned table initialised at random",
         tensors={"table": None},
         contract="an nn.Module; its table `(max_positions, dim)` is its `.weight`, or else its one parameter "
                  "of that shape; positions >= max_positions must raise."),
    Name("apply_rotary_embedding", family="positions", reference="harness.reference.rope",
         signature="apply_rotary_embedding(x, positions, base=10000.0)",
         compared=TOLERANCE + " (default base; the yardstick is the worse layout's)",
         contract="x (B, H, L, D), positions (L,) or (B, L); theta_i = base^(-2i/D); rotate-half or "
                  "interleaved."),
    Name("RotaryEmbedding", family="positions", reference="harness.reference.rope", kind="class",
         signature="RotaryEmbedding(dim, base=10000.0); forward(x (B, H, L, D), offset=0)",
         not_compared="the stateful form: apply_rotary_embedding is compared; call sequences are rope_module's",
         contract="the stateful form of `apply_rotary_embedding`, as libraries ship it "
                  "(rotary-embedding-torch's `rotate_queries_or_keys(t, offset=...)`, Hugging Face's rotary "
                  "caches): an nn.Module built once in the target's worker and called again and again; "
                  "`forward` rotates x at positions offset … offset + L − 1 (L = x.shape[−2]), in x's dtype and "
                  "on its device. It may cache tables between calls; no call may depend on the ones before it. "
                  "The harness never casts the module's dtype (calls in several dtypes go to one instance) and "
                  "moves it with `.to(device)` before calls on another device."),
    # scaled RoPE (context extension): scaling is a dict in Hugging Face's rope_parameters vocabulary
    # (rope_type linear / dynamic / yarn / llama3 / longrope and their keys; reference/rope_scaling.py)
    Name("rope_frequencies", family="rope_scaling", reference="harness.reference.rope_scaling",
         signature="rope_frequencies(dim, base=10000.0, scaling=None, seq_len=None) -> (inv_freq, attention_factor)",
         compared=TOLERANCE + " on the log-frequencies and the log attention factor (every rule, drawn "
                              "parameters, both sides of the original length)",
         contract="scaled RoPE (context extension), after Hugging Face's `ROPE_INIT_FUNCTIONS`: `inv_freq` "
                  "`(R/2,)` the angle per position of each pair, R = int(dim · `partial_rotary_factor`) the "
                  "rotated dims (dim: the head dim; the factor, default 1, in `scaling` for any rule, the "
                  "formulas then run over R), `attention_factor` the number cos and sin are multiplied by (1 "
                  "where a rule has none). `scaling` None is plain RoPE (base^(−2i/dim)); else a dict in HF's "
                  "`rope_parameters` vocabulary: `rope_type` `linear` (`factor`), `dynamic` (`factor`, "
                  "`original_max_position_embeddings`; the base grows with `seq_len` past the original length), "
                  "`yarn` (`factor`, `original_max_position_embeddings`, `beta_fast`, `beta_slow`, `truncate`, "
                  "`mscale`, `mscale_all_dim`, `attention_factor`), `llama3` (`factor`, `low_freq_factor`, "
                  "`high_freq_factor`, `original_max_position_embeddings`), `longrope` (`short_factor`, "
                  "`long_factor` lists of dim/2, `factor`, `original_max_position_embeddings`, "
                  "`attention_factor`; long factors when `seq_len` > the original length); `factor` is explicit "
                  "(a `max_position_embeddings` key is a model config's and must not replace it). Formulas: "
                  "`reference/rope_scaling.py`."),
    Name("ScaledRotaryEmbedding", family="rope_scaling", reference="harness.reference.scaled_rope", kind="class",
         signature="ScaledRotaryEmbedding(dim, base=10000.0, scaling=None); forward(x (B, H, L, D), positions (L,))",
         not_compared="the stateful form: rope_frequencies is compared; call sequences are scaled_rope_module's",
         contract="the rotary module a model builds once with a scaling rule (Hugging Face's rotary embeddings "
                  "with `dynamic_rope_update`, torchtune's `Llama3ScaledRoPE`) and calls with growing and "
                  "shorter sequences: `forward` rotates the first R dims of x (R as in `rope_frequencies`) at "
                  "`positions` by the frequencies of `scaling` at seq_len = max(positions) + 1, multiplies them "
                  "by the attention factor and passes dims R … D − 1 through untouched; in x's dtype and on its "
                  "device. Pairing (`rope_layout`) and the dynamic rule's memory (`dynamic_update`: `per_call`, "
                  "or Hugging Face's `grow_until_reset`) are named conventions; a call shorter than the original "
                  "length is plain RoPE whatever came before."),
    Name("alibi_slopes", family="positions", reference="harness.reference.alibi",
         signature="alibi_slopes(num_heads, shard=None) -> Tensor[H]", compared=TOLERANCE,
         features={"alibi_slopes_shard": "shard=(h0, h1) in alibi_slopes: a tensor-parallel rank's heads"},
         options={"shard": "alibi_slopes_shard"},
         contract="the ALiBi paper's get_slopes. `shard=(h0, h1)`: heads h0 … h1 − 1 of a `num_heads` model "
                  "(a tensor-parallel rank's heads), i.e. `get_slopes(num_heads)[h0:h1]`, never the slopes of "
                  "an (h1 − h0)-head model."),
    Name("alibi_bias", family="positions", reference="harness.reference.alibi",
         signature="alibi_bias(num_heads, query_len, key_len, shard=None) -> Tensor[H, Lq, Lk]",
         compared=TOLERANCE + " on the causal keys, up to the per-row constant softmax ignores",
         features={"alibi_bias_shard": "shard=(h0, h1) in alibi_bias: a tensor-parallel rank's heads"},
         options={"shard": "alibi_bias_shard"},
         contract="queries aligned to the end of the keys; compared up to a per-row constant. `shard=(h0, h1)`: "
                  "the rows of heads h0 … h1 − 1 of the `num_heads`-head bias (a tensor-parallel rank's)."),
    Name("AlibiPositionalBias", family="positions", reference="harness.reference.alibi", kind="class",
         signature="AlibiPositionalBias(num_heads); forward(query_len, key_len) -> Tensor[H, Lq, Lk]",
         not_compared="the cached form: alibi_bias is compared; call sequences are alibi_module's",
         contract="the cached form of `alibi_bias`, as x-transformers ships it: an nn.Module built once and "
                  "called again and again; each call returns the bias of the last query_len queries over "
                  "key_len keys (queries aligned to the end), compared as `alibi_bias` is, whatever the calls "
                  "before it. It may keep the bias of a longer call and slice it (rows `-Lq:`, columns `-Lk:`). "
                  "Moved with `.to(device)`."),
    Name("t5_relative_position_bucket", family="positions", reference="harness.reference.t5_bucket",
         signature="t5_relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, "
                   "max_distance=128)",
         compared="equal, except where the float32 logarithm lands within 1e-4 of a bucket boundary "
                  "(defaults, and bidirectional=False)",
         contract="relative_position = key position - query position (Mesh TensorFlow / HF convention)."),
    # table: the learned (num_buckets, H) embedding weight; queries aligned to the END of the keys (query i
    # at position key_len - query_len + i, as in KV-cache decoding); bias[h, i, j] = table[bucket(key - query), h]
    Name("t5_relative_position_bias", family="positions", reference="harness.reference.t5_bias",
         signature="t5_relative_position_bias(table, query_len, key_len, bidirectional=True, num_buckets=32, "
                   "max_distance=128) -> Tensor[H, query_len, key_len]",
         compared="equal (a lookup in one table), except at the buckets t5_relative_position_bucket exempts",
         contract="the T5 bias from positions: table is the learned (num_buckets, H) embedding weight; queries "
                  "aligned to the end of the keys (query i at position key_len − query_len + i, as in KV-cache "
                  "decoding; query_len ≤ key_len); bias[h, i, j] = table[bucket(key − query), h], the table's "
                  "entry itself (no scale)."),
    Name("T5RelativePositionBias", family="positions", reference="harness.reference.t5_bias", kind="class",
         signature="T5RelativePositionBias(num_heads, bidirectional=True, num_buckets=32, max_distance=128); "
                   "forward(query_len, key_len) -> Tensor[H, Lq, Lk]; attribute relative_attention_bias "
                   "(nn.Embedding(num_buckets, H))",
         not_compared="the module form: t5_relative_position_bias is compared",
         tensors={"table": "relative_attention_bias.weight"}, tensors_named_as="Hugging Face's T5Attention",
         contract="the module form of `t5_relative_position_bias` (Hugging Face's T5Attention and "
                  "x-transformers name the table `relative_attention_bias`): built once; each call is the "
                  "lookup in the table as it is at that call. The harness overwrites the table between calls, "
                  "as a training step does: a module may cache bucket indices, never the table's values."),
    # ---- norms ----------------------------------------------------------------------------------
    Name("LayerNorm", family="norms", reference="harness.reference.layernorm", kind="class",
         signature="LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)",
         compared=TOLERANCE + " (built with the same weight and bias, called on one x)",
         tensors={"weight": "weight", "bias": "bias"}, tensors_named_as="torch.nn.LayerNorm",
         contract="constructed like torch.nn.LayerNorm."),
    Name("RMSNorm", family="norms", reference="harness.reference.rmsnorm", kind="class",
         signature="RMSNorm(normalized_shape, eps=None, elementwise_affine=True)",
         compared=TOLERANCE + " (built with the same weight, called on one x)",
         tensors={"weight": "weight"}, tensors_named_as="torch.nn.RMSNorm",
         contract="constructed like torch.nn.RMSNorm."),
    Name("residual_block", family="norms", reference="harness.reference.blocks",
         signature="residual_block(dim, sublayer) -> nn.Module; forward(x (..., dim))",
         not_compared="a freshly initialised norm and the harness's sublayer: placement is norm_placement's",
         contract="a residual block around sublayer (an nn.Module (..., dim) -> (..., dim)) with one freshly "
                  "initialized norm: pre-norm x + sublayer(norm(x)) or post-norm norm(x + sublayer(x)); which "
                  "one is measured and named (norm_placement)."),
    # ---- bert: objectives -----------------------------------------------------------------------
    Name("mask_tokens", family="bert", reference="harness.reference.mlm",
         signature="mask_tokens(input_ids, *, vocab_size, mask_token_id, special_tokens_mask=None, "
                   "mlm_probability=0.15, generator=None) -> (inputs, labels)",
         not_compared="random draws: two correct targets draw differently (their statistics are each "
                      "target's suites')",
         contract="BERT MLM masking: 15 % selected; 80/10/10 mask/random/unchanged; labels -100 elsewhere."),
    Name("distillation_loss", family="bert", reference="harness.reference.distillation",
         signature="distillation_loss(student_logits, teacher_logits, temperature=1.0)",
         compared=TOLERANCE + " (the default temperature, and a drawn one)",
         contract="KL(teacher // student) on temperature-softened distributions, times T^2, batch mean."),
    Name("span_corruption", family="bert", reference="harness.reference.span_corruption",
         signature="span_corruption(tokens, *, sentinel_ids, noise_density=0.15, mean_span_length=3.0, "
                   "generator=None) -> (inputs, targets)",
         not_compared="random draws, as mask_tokens",
         contract="T5 span corruption with sentinels."),
    # ---- bert: models ---------------------------------------------------------------------------
    Name("build_model", family="bert", reference="harness.reference.dependency_models",
         signature="build_model() -> nn.Module; forward(inputs_embeds (B, L, D)) -> (B, L, H); "
                   "attribute embed_dim = D",
         compared=TOLERANCE + " (every module loaded with the first target's weights; suites/consistency/models.py)",
         contract="a model from input embeddings to hidden states (random weights are fine); its dependency "
                  "profile (which inputs each output depends on, from the Jacobian) must match MODEL_CLAIM."),
    Name("MODEL_CLAIM", family="bert", reference="harness.reference.dependency_models", kind="constant",
         signature="MODEL_CLAIM = 'bidirectional' | 'causal' | 'concat_unidirectional'",
         contract="what build_model's model is: a BERT-like encoder (every output sees every input), a GPT-like "
                  "decoder (output i sees inputs j <= i) or ELMo-like [forward LM ; backward LM] features."),
    Name("build_bert", family="bert", reference="harness.reference.bert",
         signature="build_bert(size='base', add_pooling_layer=True) -> nn.Module",
         not_compared="BERT-base and -large: too large to copy between targets here (build_model and "
                      "bert_embeddings compare two backends of one model with shared weights)",
         contract="BERT-base / BERT-large from the published configurations (vocab 30522, 512 positions, 2 "
                  "segments); parameters are counted (on the meta device when the model can be built there)."),
    Name("bert_embeddings", family="bert", reference="harness.reference.bert",
         signature="bert_embeddings(vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2) "
                   "-> nn.Module; forward(input_ids, token_type_ids=None, position_ids=None) -> (B, L, hidden_size)",
         compared=TOLERANCE + " (as build_model)",
         contract="BERT's input representation before LayerNorm and dropout: token + position + segment "
                  "embeddings (defaults: segment 0, positions 0..L-1)."),
    Name("build_inputs", family="bert", reference="harness.reference.bert",
         signature="build_inputs(tokens_a, tokens_b=None, *, cls_id=101, sep_id=102) -> (input_ids, token_type_ids)",
         compared="equal (input_ids and token_type_ids)",
         contract="[CLS] A [SEP] or [CLS] A [SEP] B [SEP]; segment 0 through the first [SEP], 1 after it."),
    Name("make_nsp_pairs", family="bert", reference="harness.reference.bert",
         signature="make_nsp_pairs(documents, num_pairs, *, generator=None) -> [(sentence_a, sentence_b, label)]",
         not_compared="random draws, as mask_tokens",
         contract="next-sentence-prediction pairs from documents (lists of sentences, each a list of ids): "
                  "label 0 IsNext (B follows A in its document) or 1 NotNext (B not A's successor), 50/50."),
)

# ---- the tables derived from the records ---------------------------------------------------------

NAMES: dict[str, Name] = {r.name: r for r in RECORDS}
#: the families (``suites/<family>/``), in the records' order of first appearance
FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(r.family for r in RECORDS))


def _features() -> dict[str, str]:
    """feature -> description, from every record (a feature two records name has one description)."""
    out: dict[str, str] = {}
    for r in RECORDS:
        for feature, what in r.features.items():
            if out.setdefault(feature, what) != what:
                raise ValueError(f"feature {feature!r}: {r.name} describes it as {what!r}, "
                                 f"another record as {out[feature]!r}")
    return out


#: the ``HARNESS_UNSUPPORTED`` features protocol names own (``declarations.FEATURES`` adds the rest)
FEATURES: dict[str, str] = _features()
#: name -> the arguments (by position and by keyword) it may write in place (``guard.MUTABLE``)
MUTABLE: dict[str, frozenset] = {r.name: frozenset({*(r.params.index(w) for w in r.writes), *r.writes})
                                 for r in RECORDS if r.writes}
#: the names whose output must be new memory (``guard.NO_ALIAS``)
NO_ALIAS: frozenset[str] = frozenset(r.name for r in RECORDS if r.new_memory)
#: (name, role) -> where a module's tensor is (``module_tensors.RULES``), and whose names those are
TENSORS: dict[tuple[str, str], str | None] = {(r.name, role): path for r in RECORDS for role, path in r.tensors.items()}
TENSORS_NAMED_AS: dict[str, str] = {r.name: r.tensors_named_as for r in RECORDS if r.tensors_named_as}
#: the names the consistency section does not compare, and why (``suites/consistency/``)
NOT_COMPARED: dict[str, str] = {r.name: r.not_compared for r in RECORDS if r.not_compared}
#: the names it compares, and how (each has a ``Case`` in its family's ``suites/<family>/specs.py``)
COMPARED: dict[str, str] = {r.name: r.compared for r in RECORDS if r.compared}


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
    missing = [p for p in entry.required if p not in params]
    if missing:
        return (f"signature {sig} lacks parameter(s) {', '.join(missing)}; "
                f"the protocol calls {entry.signature}")
    return None


def lacking_features(name: str, obj: object) -> dict[str, str]:
    """feature -> why, for each optional parameter of ``name`` (its record's ``options``) that
    ``obj``'s signature lacks; {} when it takes them all, takes ``**kwargs`` or has no signature."""
    entry = NAMES.get(name)
    if entry is None or not entry.options:
        return {}
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return {}
    return {feature: f"{name} takes no {param!r} parameter" for param, feature in entry.options.items()
            if param not in params}
