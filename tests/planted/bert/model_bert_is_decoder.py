"""Planted bug: a "BERT" encoder that is actually causal.

Real pattern: a ``BertModel`` built from a config with ``is_decoder=True`` (copied from a
``BertLMHeadModel`` / generation setup) silently applies a causal mask, so the "bidirectional"
encoder sees only the left context. Caught by: models.dependency.
Message: but the model is causal
"""
from harness.reference.dependency_models import build_bert_like

MODEL_CLAIM = "bidirectional"


def build_model():
    return build_bert_like(is_decoder=True)  # BUG: causal self-attention
