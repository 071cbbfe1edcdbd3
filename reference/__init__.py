"""Reference implementations of the protocol: plain, readable, float64 math.

``--impl reference`` (the default target) runs the suites against these.
One component per module; shapes are in each module's docstring. Every protocol name is
re-exported here, from the module its record names (``harness.protocol``: ``reference=``);
tests/test_protocol_records.py checks both. (This package imports nothing from ``harness``.)
"""
from reference.attention import scaled_dot_product_attention
from reference.sliding_window import sliding_window_attention
from reference.kvcache import attention_with_kvcache
from reference.attention_varlen import attention_varlen
from reference.layernorm import LayerNorm
from reference.rmsnorm import RMSNorm
from reference.blocks import residual_block
from reference.sinusoidal import sinusoidal_position_embedding
from reference.learned_positions import LearnedPositionEmbedding
from reference.rope import RotaryEmbedding, apply_rotary_embedding
from reference.alibi import AlibiPositionalBias, alibi_bias, alibi_slopes
from reference.t5_bucket import t5_relative_position_bucket
from reference.t5_bias import T5RelativePositionBias, t5_relative_position_bias
from reference.mlm import mask_tokens
from reference.distillation import distillation_loss
from reference.span_corruption import span_corruption
from reference.dependency_models import MODEL_CLAIM, build_model
from reference.bert import bert_embeddings, build_bert, build_inputs, make_nsp_pairs

__all__ = ["scaled_dot_product_attention", "sliding_window_attention", "attention_with_kvcache", "attention_varlen",
           "LayerNorm", "RMSNorm", "residual_block",
           "sinusoidal_position_embedding", "LearnedPositionEmbedding", "apply_rotary_embedding", "RotaryEmbedding",
           "alibi_slopes", "alibi_bias", "AlibiPositionalBias", "t5_relative_position_bucket",
           "t5_relative_position_bias", "T5RelativePositionBias",
           "mask_tokens", "distillation_loss", "span_corruption",
           "MODEL_CLAIM", "build_model", "bert_embeddings", "build_bert", "build_inputs", "make_nsp_pairs"]
