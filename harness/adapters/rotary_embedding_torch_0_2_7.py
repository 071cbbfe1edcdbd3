"""rotary-embedding-torch 0.2.7, installed side by side with
`pip install --target $HARNESS_LIBS/ret-0.2.7 --no-deps rotary-embedding-torch==0.2.7` (HARNESS_LIBS
defaults to /tmp/libs), as the stateful ``RotaryEmbedding`` (harness/adapters/rotary_embedding_torch.py)."""
from harness.adapters.releases import import_release

globals().update(import_release("rotary-embedding-torch", "0.2.7", "ret-0.2.7",
                                "harness.adapters.rotary_embedding_torch"))
