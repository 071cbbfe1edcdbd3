"""transformers 4.38.2's Mistral FlashAttention-2 sliding window (``harness.adapters.hf_mistral_window``):
the flash_attn call it makes, ``window_size=(w, w)`` with ``causal=True``, on an emulated exact-window
kernel: w + 1 keys, declared (``window_extent: w+1``, FlashAttention's convention), so it passes the
sliding-window suite alone and disagrees with the eager path held to it. Does not load without
``pip install --target /tmp/libs/tf-4.38.2 --no-deps transformers==4.38.2``."""
from harness.adapters.hf_mistral_window import VERSION, check_fa2_source, fa2_call

__version__ = VERSION
HARNESS_CONVENTIONS = {"window_extent": "w+1"}
HARNESS_DTYPES = ("float16", "bfloat16")  # what flash_attn takes
check_fa2_source()


def sliding_window_attention(query, key, value, window, scale=None):
    return fa2_call(query, key, value, window, scale)
