"""x-transformers 1.22.17's AlibiPositionalBias as the protocol's cached ``AlibiPositionalBias`` (see
``harness.adapters.xtransformers_alibi``): its cache slices ``bias[..., -i:, -j:]``, the fix; it passes.
ImportError (the target does not load) without ``pip install --target /tmp/libs/xt-1.22.17 --no-deps x-transformers==1.22.17``."""
from harness.adapters.xtransformers_alibi import alibi_module

__version__ = "1.22.17"
AlibiPositionalBias = alibi_module(__version__)
