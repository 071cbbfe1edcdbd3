"""rotary-embedding-torch 0.8.2, installed side by side with
`pip install --target $HARNESS_LIBS/ret-0.8.2 --no-deps rotary-embedding-torch==0.8.2` (HARNESS_LIBS
defaults to /tmp/libs), as the stateful ``RotaryEmbedding`` (harness/adapters/rotary_embedding_torch.py)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _release import load  # noqa: E402

globals().update(load("rotary-embedding-torch", "0.8.2", "ret-0.8.2", "harness.adapters.rotary_embedding_torch"))
