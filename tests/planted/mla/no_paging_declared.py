"""Not a bug: a correct kernel over one latent head and a linear cache only (DeepSeek's MQA; no block
table), which declares the paged cache and several latent heads unsupported. Its paged and kv_heads
properties are reported unsupported, not failed; agreement passes."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _base import MLA  # noqa: E402

HARNESS_UNSUPPORTED = ["mla_paged", "mla_kv_heads"]


def mla_decode(q, kv_cache, cache_seqlens, head_dim_v, scale=None, causal=True):
    return MLA().mla_decode(q, kv_cache, cache_seqlens, head_dim_v, None, scale, causal)
