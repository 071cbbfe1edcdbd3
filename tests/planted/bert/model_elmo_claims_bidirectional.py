"""Planted bug: an ELMo-style [forward LM ; backward LM] model claims to be bidirectional.

Real pattern: the seeds' point about ELMo -- every output position depends on every input
position, so a token-level check calls it bidirectional, yet no single feature sees both
sides (it is two unidirectional LMs concatenated). Caught by: models.dependency (per-feature).
Message: but the model is concat_unidirectional
"""
from harness.reference.dependency_models import build_elmo_like as build_model  # noqa: F401

MODEL_CLAIM = "bidirectional"  # BUG: it is concat_unidirectional
