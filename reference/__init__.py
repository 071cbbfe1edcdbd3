"""Reference implementations of the protocol: plain, readable, float64 math.

``--impl reference`` (the default target) runs the suites against these.
One component per module; shapes are in each module's docstring. Every protocol name is
re-exported here, from the module its record names (``harness.spec.protocol``: ``reference=``);
tests/test_protocol_records.py checks both. (This package imports nothing from ``harness``.)
"""
from harness.reference.attention import scaled_dot_product_attention
from harness.reference.sliding_window import sliding_window_attention
from harness.reference.chunked_attention import chunked_attention
from harness.reference.kvcache import attention_with_kvcache
from harness.reference.attention_varlen import attention_varlen
from harness.reference.mla import mla_decode
from harness.reference.layernorm import LayerNorm
from harness.reference.rmsnorm import RMSNorm
from harness.reference.blocks import residual_block
from harness.reference.sinusoidal import sinusoidal_position_embedding
from harness.reference.learned_positions import LearnedPositionEmbedding
from harness.reference.rope import RotaryEmbedding, apply_rotary_embedding
from harness.reference.rope_scaling import rope_frequencies
from harness.reference.scaled_rope import ScaledRotaryEmbedding
from harness.reference.alibi import AlibiPositionalBias, alibi_bias, alibi_slopes
from harness.reference.t5_bucket import t5_relative_position_bucket
from harness.reference.t5_bias import T5RelativePositionBias, t5_relative_position_bias
from harness.reference.mlm import mask_tokens
from harness.reference.distillation import distillation_loss
from harness.reference.span_corruption import span_corruption
from harness.reference.dependency_models import MODEL_CLAIM, build_model
from harness.reference.bert import bert_embeddings, build_bert, build_inputs, make_nsp_pairs

__all__ = ["scaled_dot_product_attention", "sliding_window_attention", "chunked_attention", "attention_with_kvcache", "attention_varlen", "mla_decode",
           "LayerNorm", "RMSNorm", "residual_block",
           "sinusoidal_position_embedding", "LearnedPositionEmbedding", "apply_rotary_embedding", "RotaryEmbedding",
           "rope_frequencies", "ScaledRotaryEmbedding",
           "alibi_slopes", "alibi_bias", "AlibiPositionalBias", "t5_relative_position_bucket",
           "t5_relative_position_bias", "T5RelativePositionBias",
           "mask_tokens", "distillation_loss", "span_corruption",
           "MODEL_CLAIM", "build_model", "bert_embeddings", "build_bert", "build_inputs", "make_nsp_pairs"]
