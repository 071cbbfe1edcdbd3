"""x-transformers 1.0.2's RelativePositionBias as ``t5_relative_position_bias`` (see
``harness.adapters.xtransformers_t5_bias``): queries aligned to the end of the keys; passes.
ImportError (the target does not load) without ``pip install --target /tmp/libs/xt-1.0.2 --no-deps x-transformers==1.0.2``."""
from harness.adapters.xtransformers_t5_bias import bias_function

__version__ = "1.0.2"
t5_relative_position_bias = bias_function(__version__)
