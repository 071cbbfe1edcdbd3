"""THE list of correct controls: the targets the project ships that must never fail a property.

``python -m harness sweep`` runs each of them under random Hypothesis seeds; any ``fail`` or
``error`` cell of one is a false alarm of the harness (issue 21). Every module in
``harness/adapters/`` is named here exactly once: as a control, as a known-buggy release (with the
bug and the property that catches it) or as a module that is not a target (with what it is), so a
new adapter cannot be forgotten (``tests/test_sweep.py`` checks it). Targets under
``tests/planted/`` are bugs on purpose and never controls.

A control may need a library that is optional (``library``: its import name and install command)
or an old release installed side by side (``release``: ``harness.adapters.releases``' folder,
package and version). Without it the sweep reports the control "not run (install: ...)"; a
missing release is an alarm instead when ``$HARNESS_REQUIRE_RELEASES`` is set (as in CI).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from harness.basics import optional


@dataclass(frozen=True)
class Control:
    spec: str                                   # the --impl spec
    why: str                                    # why it is correct (one line)
    library: tuple[str, str] | None = None      # (import name, install command) of an optional library
    release: tuple[str, str, str] | None = None  # (folder, package, version) held side by side


def _adapter(name: str, why: str, **kw) -> Control:
    return Control(f"harness.adapters.{name}", why, **kw)


# (import name, pinned install command): harness.basics.optional, the one table of the optional libraries
_RET = optional.library("rotary_embedding_torch")
_XT = optional.library("x_transformers")
_TT = optional.library("torchtune")
_TRITON = optional.library("triton")
_LIGER = optional.library("liger_kernel")
_ONNX = optional.library("onnx")
_ORT = optional.library("onnxruntime")
_FLA = optional.library("fla")
_XF = optional.library("xformers")

CONTROLS: tuple[Control, ...] = (
    Control("torch.nn.functional", "PyTorch's own SDPA, the de-facto definition of the protocol's attention"),
    Control("torch.nn", "PyTorch's own LayerNorm and RMSNorm"),
    Control("reference", "the project's float64 references: the protocol's definition"),
    _adapter("hf_attention", "transformers' Llama eager attention, declares its finite-mask convention"),
    _adapter("hf_bert_attention", "transformers' BERT eager attention"),
    _adapter("hf_chunked_attention", "transformers' chunked attention path (Llama 4): sdpa_mask with "
             "chunked_causal_mask_function and sdpa_attention_forward"),
    _adapter("hf_deepseek_mla", "transformers' DeepSeek-V3 attention (MLA, eager) as a model calls it, weights "
             "chosen so that its unabsorbed form is the decode form; one latent head, a linear cache declared"),
    _adapter("hf_packed_attention", "transformers' packed-sequence masks (create_causal_mask / "
             "create_chunked_causal_mask on restarting position_ids) with sdpa_attention_forward"),
    _adapter("hf_positions", "transformers' Llama RoPE, Bloom ALiBi, T5 bias, DistilBERT sinusoidal"),
    _adapter("hf_rope_scaling", "transformers' ROPE_INIT_FUNCTIONS (linear, dynamic, yarn, llama3, longrope) as its "
             "models call them, with a model config"),
    _adapter("hf_scaled_rope", "transformers' GPT-NeoX rotary module with dynamic_rope_update and its partial-rotary "
             "apply_rotary_pos_emb (rotate_half and grow_until_reset declared)"),
    _adapter("hf_llama_rmsnorm", "transformers' LlamaRMSNorm (fixed eps declared)"),
    _adapter("hf_t5_layernorm", "transformers' T5LayerNorm (an RMS norm; fixed eps declared)"),
    _adapter("hf_gemma_rmsnorm", "transformers' GemmaRMSNorm (1 + weight declared)"),
    _adapter("torch_nested_attention", "torch's nested jagged tensors with SDPA as attention_varlen (no causal, "
             "window, softcap or sinks: declared)"),
    _adapter("torch_flex_attention", "torch's FlexAttention with a document mask as attention_varlen (unfused on a "
             "CPU, ~1 s a call; no CPU backward: declared)"),
    _adapter("hf_mlm", "transformers' DataCollatorForLanguageModeling masking"),
    _adapter("hf_mistral_eager_window", "transformers 4.38.2's Mistral eager window: w keys, as the protocol",
             release=("tf-4.38.2", "transformers", "4.38.2")),
    _adapter("hf_mistral_fa2_window", "transformers 4.38.2's FA2 window call (emulated kernel), w + 1 keys "
             "declared", release=("tf-4.38.2", "transformers", "4.38.2")),
    _adapter("torchtune_positions", "torchtune's RotaryPositionalEmbeddings", library=_TT),
    _adapter("torchtune_norms", "torchtune's Fp32LayerNorm and RMSNorm (float32 compute: float64 not declared)",
             library=_TT),
    _adapter("torchtune_kvcache", "torchtune's KVCache.update with its generation mask and GQA expansion over "
             "torch SDPA (one cache position per batch: ragged lengths unsupported)", library=_TT),
    _adapter("torchtune_rope_scaling", "torchtune's Llama3ScaledRoPE (llama3) and RotaryPositionalEmbeddings (plain) "
             "theta buffers as rope_frequencies; its other rules do not exist (unsupported)", library=_TT),
    _adapter("torchtune_scaled_rope", "torchtune's Llama3ScaledRoPE (llama3) and RotaryPositionalEmbeddings (plain) "
             "called as its attention calls them, as ScaledRotaryEmbedding", library=_TT),
    _adapter("xtransformers_positions", "x-transformers 2.x: RoPE, ALiBi, T5 bias, sinusoidal, learned table",
             library=_XT),
    _adapter("xtransformers_attention", "x-transformers 2.x's Attend kernel (its own einsum path): SDPA and a KV "
             "cache with softcap and sinks; bottom-right causal declared, strided GQA heads reordered",
             library=_XT),
    _adapter("xtransformers_rope_scaling", "x-transformers 2.x's RotaryEmbedding with interpolation_factor (the "
             "linear rule; the others do not exist there: unsupported)", library=_XT),
    _adapter("xtransformers_scaled_rope", "x-transformers 2.x's RotaryEmbedding and apply_rotary_pos_emb (linear "
             "rule, native partial rotary dims) as ScaledRotaryEmbedding", library=_XT),
    _adapter("rotary_embedding_torch", "the installed rotary-embedding-torch (after the 0.8.3 cache fix)",
             library=_RET),
    _adapter("rotary_embedding_torch_0_2_7", "0.2.7 fixed 0.2.6's cache keyed on the length only",
             release=("ret-0.2.7", "rotary-embedding-torch", "0.2.7")),
    _adapter("rotary_embedding_torch_0_8_3", "0.8.3 fixed 0.8.2's offset call writing the table's first rows",
             release=("ret-0.8.3", "rotary-embedding-torch", "0.8.3")),
    _adapter("xtransformers_1_0_2_t5_bias", "1.0.2 fixed 1.0.1's start-aligned T5 bias queries",
             release=("xt-1.0.2", "x-transformers", "1.0.2")),
    _adapter("xtransformers_1_22_17_alibi", "1.22.17 fixed 1.22.16's ALiBi cache sliced from the start",
             release=("xt-1.22.17", "x-transformers", "1.22.17")),
    _adapter("torch_kvcache", "PyTorch's PagedAttention (its page table, cache update and physical block mask) on "
             "eager flex_attention: linear and paged caches, softcap, sinks"),
    _adapter("hf_attention_kvcache", "transformers' decoding attention as its models call it: masking_utils' "
             "masks, sdpa_attention_forward, Gemma 2's softcap and gpt-oss's sinks eager paths"),
    _adapter("xformers_varlen", "xformers 0.0.35's block-diagonal attention biases (bottom-right causal, local "
             "window) materialized, as attention_varlen", library=_XF),
    _adapter("onnx_attention", "the ONNX standard's Attention operator (opset 25) run by its reference evaluator: "
             "SDPA, the sliding window, a linear KV cache (softcap, GQA); top-left causal, zeros for fully "
             "masked rows, w keys", library=_ONNX),
    _adapter("ort_attention", "onnxruntime 1.32's CPU kernels: GroupQueryAttention over a KV cache (GQA, window and its "
             "windowed cache, rotary, softcap, sinks) and the standard Attention operator (SDPA, sliding window)",
             library=_ORT),
    _adapter("ort_positions", "onnxruntime 1.32's RotaryEmbedding contrib operator (position ids and an offset), "
             "rotate-half", library=_ORT),
    _adapter("ort_norms", "onnxruntime 1.32's LayerNormalization and SimplifiedLayerNormalization (its RMS norm; "
             "float32 statistics for float16 inputs, as stash_type says)", library=_ORT),
    _adapter("liger_positions_hf_layout", "liger-kernel 0.8.5's Triton RoPE given q and its gradient in the "
             "layout it assumes (Hugging Face's); its other layouts are liger_positions, known-buggy",
             library=_LIGER),
    _adapter("liger_norms", "liger-kernel 0.8.5's Triton LayerNorm and RMSNorm (forward and backward), run under "
             "Triton's interpreter with the harness's fixes", library=_LIGER),
    _adapter("fla_norms", "flash-linear-attention 0.6.0's Triton LayerNorm and RMSNorm (autotuned; float32 "
             "statistics: float64 declared)", library=_FLA),
    _adapter("fla_attention", "flash-linear-attention 0.6.0's Triton softmax attention (parallel_attn: causal, "
             "packed sequences, window, GQA, sinks; forward and backward)", library=_FLA),
    _adapter("fla_positions", "flash-linear-attention 0.6.0's Triton rotary embedding, as a function and as its "
             "stateful RotaryEmbedding", library=_FLA),
    # the project's own tiled Triton kernels (interpreted on a CPU: slow, so a sweep may name them apart)
    Control("reference.triton.flash_attention", "tiled flash attention, forward and backward", library=_TRITON),
    Control("reference.triton.kvcache", "decode over a linear or rolling cache", library=_TRITON),
    Control("reference.triton.norms", "RMSNorm and LayerNorm, forward and backward", library=_TRITON),
    Control("reference.triton.rope", "RoPE, rotate-half pairing", library=_TRITON),
    Control("reference.triton.rope_interleaved", "RoPE, interleaved pairing", library=_TRITON),
)

#: adapters of releases with a known bug (not controls): module -> the bug and the property that catches it
KNOWN_BUGGY: dict[str, str] = {
    "rotary_embedding_torch_0_2_6": "cache keyed on the length only (rope_module.call_sequences)",
    "rotary_embedding_torch_0_8_2": "a call at an offset writes the table's first rows (rope_module.call_sequences)",
    "xtransformers_1_0_1_t5_bias": "queries aligned to the start of the keys (t5_bias.end_alignment)",
    "xtransformers_1_22_16_alibi": "its cache slices the first queries' rows (alibi_module.call_sequences)",
    "liger_positions": "liger-kernel 0.8.5's RoPE on a contiguous (B, H, 1, D) q rotates the rows wrong: its row "
                       "stride is read from the size-1 L dim (rope.agreement at L = 1; found by the sweep, "
                       "2026-12-03; 0.8.5 is the newest release)",
    "hf_rope_4_38_2": "transformers 4.38.2's dynamic NTK rotary module never restores its base after a long call "
                      "(scaled_rope_module.call_sequences)",
    "onnx_norms": "onnx 1.23.2's reference evaluator computes LayerNormalization's and RMSNormalization's statistics "
                  "in float16 for float16 inputs, not in stash_type's float32: x^2 overflows from |x| = 256 "
                  "(rmsnorm.large_values, layernorm.large_values; found 2026-12-07; 1.23.2 is the newest release)",
}

#: modules of harness/adapters/ that are not targets: module -> what they are
NOT_TARGETS: dict[str, str] = {
    "__init__": "the package",
    "releases": "loads side-by-side releases for the release adapters",
    "hf_attention_interface": "registers a target's attention in transformers (a bridge, no protocol name)",
    "hf_norms": "shared constructor mapping of the hf_*rmsnorm / hf_t5_layernorm adapters",
    "linear_cache": "the protocol's cache lengths and the linear-cache write of the KV-cache adapters",
    "ort_graph": "builds and caches the one-node onnxruntime sessions of the ort_* adapters",
    "last_dim_norm": "the protocol's norm constructors around a library norm over the last dim (the norm adapters)",
    "torchtune_files": "reads torchtune's module files when its package import (torchao) fails",
    "hf_mistral_window": "shared code of hf_mistral_eager_window and hf_mistral_fa2_window",
    "flex_options": "shared softcap score_mod and sink rescaling of the torch_flex_attention / torch_kvcache adapters",
    "xtransformers_alibi": "shared code of the xtransformers_1_22_*_alibi release adapters",
    "xtransformers_t5_bias": "shared code of the xtransformers_1_0_*_t5_bias release adapters",
}


def by_spec() -> dict[str, Control]:
    return {c.spec: c for c in CONTROLS}


def require_releases() -> bool:
    return bool(os.environ.get("HARNESS_REQUIRE_RELEASES"))


def not_installed(control: Control) -> str | None:
    """The install command when what ``control`` needs is absent here (checked without importing
    it), else None."""
    if control.library and optional.missing(control.library[0]):  # (and what it needs: einops, triton)
        return control.library[1]
    if control.release:
        from harness.adapters import releases
        folder, package, version = control.release
        if releases.missing(folder, package, version):
            return releases.install_command(folder, package, version)
    return None
