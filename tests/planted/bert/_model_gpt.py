"""Control (not a bug): a tiny GPT-2 that claims to be causal, as it is. Passes models.dependency."""
from harness.reference.dependency_models import build_gpt_like as build_model  # noqa: F401

MODEL_CLAIM = "causal"
