"""transformers 4.38.2's Mistral eager sliding window (``harness.adapters.hf_mistral_window``):
its own 4D mask builder, w keys. Does not load without
``pip install --target /tmp/libs/tf-4.38.2 --no-deps transformers==4.38.2``."""
from harness.adapters.hf_mistral_window import VERSION, eager_attention, mask_converter

__version__ = VERSION
#: the mask builder fills a float32 tensor with finfo(dtype).min, which overflows for float64
HARNESS_DTYPES = ("float32", "float16", "bfloat16")
_CONVERTER = mask_converter()


def sliding_window_attention(query, key, value, window, scale=None):
    return eager_attention(query, key, value, window, scale, converter=_CONVERTER)
