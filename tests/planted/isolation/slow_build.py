"""Not a bug: ``build_model`` takes 3 s to construct (as importing transformers and allocating
BERT-base can on a loaded machine) and every call after it is fast. A build runs under the import
limit, not the per-call one (``target_ops.builds``; tests/test_isolation.py)."""
import time

import torch

MODEL_CLAIM = "bidirectional"


def build_model():
    time.sleep(3)
    return torch.nn.Linear(4, 4)


def slow_call(x):
    time.sleep(3)
    return x
