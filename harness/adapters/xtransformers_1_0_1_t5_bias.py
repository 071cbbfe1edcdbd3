"""x-transformers 1.0.1's RelativePositionBias as ``t5_relative_position_bias`` (see
``harness.adapters.xtransformers_t5_bias``): queries aligned to the start of the keys when
Lq != Lk, the bug 1.0.2 fixed; ``t5_bias.end_alignment`` catches it.
ImportError (the target does not load) without ``pip install --target /tmp/libs/xt-1.0.1 --no-deps x-transformers==1.0.1``."""
from harness.adapters.xtransformers_t5_bias import bias_function

__version__ = "1.0.1"
t5_relative_position_bias = bias_function(__version__)
