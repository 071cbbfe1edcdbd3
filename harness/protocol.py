"""The plug-in protocol: the names a target may define, and their signatures.

A target defines any subset. The suites for a missing name skip with a reason
that names the attribute. A name that exists with parameters the protocol
cannot call is reported as a broken target, not skipped.

The README's "Plug-in protocol" section is generated from the same text.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Name:
    name: str
    family: str
    #: parameters the harness passes by keyword/position; they must be accepted
    params: tuple[str, ...]
    signature: str
    doc: str
    kind: str = "function"  # or "class", or "constant" (a module-level value, not called)


NAMES: dict[str, Name] = {n.name: n for n in [
    Name("scaled_dot_product_attention", "attention",
         ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"),
         "scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, "
         "is_causal=False, scale=None, enable_gqa=False)",
         "torch.nn.functional.scaled_dot_product_attention's contract: query (..., Hq, L, E), "
         "key/value (..., Hkv, S, E|Ev); boolean mask True = may attend; float mask added to the "
         "scores; with enable_gqa query head h reads KV head h // (Hq / Hkv)."),
    Name("sliding_window_attention", "attention",
         ("query", "key", "value", "window", "scale"),
         "sliding_window_attention(query, key, value, window, scale=None)",
         "causal local attention, queries aligned to the end of the keys: query at absolute "
         "position i sees exactly the keys j with i - window < j <= i."),
    Name("sinusoidal_position_embedding", "positions", ("num_positions", "dim"),
         "sinusoidal_position_embedding(num_positions, dim) -> Tensor[num_positions, dim]",
         "Vaswani et al.: PE(m, 2i) = sin(m w_i), PE(m, 2i+1) = cos(m w_i), w_i = 10000^(-2i/d)."),
    Name("LearnedPositionEmbedding", "positions", ("max_positions", "dim"),
         "LearnedPositionEmbedding(max_positions, dim); forward(positions: LongTensor)",
         "an nn.Module; positions >= max_positions must raise.", kind="class"),
    Name("apply_rotary_embedding", "positions", ("x", "positions", "base"),
         "apply_rotary_embedding(x, positions, base=10000.0)",
         "x (B, H, L, D), positions (L,) or (B, L); theta_i = base^(-2i/D); rotate-half or interleaved."),
    Name("alibi_slopes", "positions", ("num_heads",),
         "alibi_slopes(num_heads) -> Tensor[H]", "the ALiBi paper's get_slopes."),
    Name("alibi_bias", "positions", ("num_heads", "query_len", "key_len"),
         "alibi_bias(num_heads, query_len, key_len) -> Tensor[H, Lq, Lk]",
         "queries aligned to the end of the keys; compared up to a per-row constant."),
    Name("t5_relative_position_bucket", "positions",
         ("relative_position", "bidirectional", "num_buckets", "max_distance"),
         "t5_relative_position_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128)",
         "relative_position = key position - query position (Mesh TensorFlow / HF convention)."),
    Name("LayerNorm", "norms", ("normalized_shape", "eps", "elementwise_affine"),
         "LayerNorm(normalized_shape, eps=1e-5, elementwise_affine=True)",
         "constructed like torch.nn.LayerNorm.", kind="class"),
    Name("RMSNorm", "norms", ("normalized_shape", "eps", "elementwise_affine"),
         "RMSNorm(normalized_shape, eps=None, elementwise_affine=True)",
         "constructed like torch.nn.RMSNorm.", kind="class"),
    Name("residual_block", "norms", ("dim", "sublayer"),
         "residual_block(dim, sublayer) -> nn.Module; forward(x (..., dim))",
         "a residual block around sublayer (an nn.Module (..., dim) -> (..., dim)) with one freshly "
         "initialized norm: pre-norm x + sublayer(norm(x)) or post-norm norm(x + sublayer(x)); "
         "which one is measured and named (norm_placement)."),
    Name("mask_tokens", "bert",
         ("input_ids", "vocab_size", "mask_token_id", "special_tokens_mask", "mlm_probability", "generator"),
         "mask_tokens(input_ids, *, vocab_size, mask_token_id, special_tokens_mask=None, "
         "mlm_probability=0.15, generator=None) -> (inputs, labels)",
         "BERT MLM masking: 15 % selected; 80/10/10 mask/random/unchanged; labels -100 elsewhere."),
    Name("distillation_loss", "bert", ("student_logits", "teacher_logits", "temperature"),
         "distillation_loss(student_logits, teacher_logits, temperature=1.0)",
         "KL(teacher || student) on temperature-softened distributions, times T^2, batch mean."),
    Name("span_corruption", "bert",
         ("tokens", "sentinel_ids", "noise_density", "mean_span_length", "generator"),
         "span_corruption(tokens, *, sentinel_ids, noise_density=0.15, mean_span_length=3.0, "
         "generator=None) -> (inputs, targets)",
         "T5 span corruption with sentinels."),
    Name("build_model", "models", (),
         "build_model() -> nn.Module; forward(inputs_embeds (B, L, D)) -> (B, L, H); attribute embed_dim = D",
         "a model from input embeddings to hidden states (random weights are fine); its dependency profile "
         "(which inputs each output depends on, from the Jacobian) must match MODEL_CLAIM."),
    Name("MODEL_CLAIM", "models", (),
         "MODEL_CLAIM = 'bidirectional' | 'causal' | 'concat_unidirectional'",
         "what build_model's model is: a BERT-like encoder (every output sees every input), a GPT-like "
         "decoder (output i sees inputs j <= i) or ELMo-like [forward LM ; backward LM] features.",
         kind="constant"),
    Name("build_bert", "models", ("size", "add_pooling_layer"),
         "build_bert(size='base', add_pooling_layer=True) -> nn.Module",
         "BERT-base / BERT-large from the published configurations (vocab 30522, 512 positions, 2 segments); "
         "parameters are counted (on the meta device when the model can be built there)."),
    Name("bert_embeddings", "models", ("vocab_size", "hidden_size", "max_position_embeddings", "type_vocab_size"),
         "bert_embeddings(vocab_size, hidden_size, max_position_embeddings=512, type_vocab_size=2) -> nn.Module; "
         "forward(input_ids, token_type_ids=None, position_ids=None) -> (B, L, hidden_size)",
         "BERT's input representation before LayerNorm and dropout: token + position + segment embeddings "
         "(defaults: segment 0, positions 0..L-1)."),
    Name("build_inputs", "models", ("tokens_a", "tokens_b", "cls_id", "sep_id"),
         "build_inputs(tokens_a, tokens_b=None, *, cls_id=101, sep_id=102) -> (input_ids, token_type_ids)",
         "[CLS] A [SEP] or [CLS] A [SEP] B [SEP]; segment 0 through the first [SEP], 1 after it."),
    Name("make_nsp_pairs", "models", ("documents", "num_pairs", "generator"),
         "make_nsp_pairs(documents, num_pairs, *, generator=None) -> [(sentence_a, sentence_b, label)]",
         "next-sentence-prediction pairs from documents (lists of sentences, each a list of ids): label 0 "
         "IsNext (B follows A in its document) or 1 NotNext (B not A's successor), 50/50."),
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
