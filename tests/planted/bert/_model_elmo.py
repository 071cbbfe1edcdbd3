"""Control (not a bug): an ELMo-like [forward LSTM ; backward LSTM] model that claims
``concat_unidirectional``, as it is. Passes models.dependency."""
from harness.reference.dependency_models import build_elmo_like as build_model  # noqa: F401

MODEL_CLAIM = "concat_unidirectional"
