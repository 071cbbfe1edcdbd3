"""x-transformers 1.22.16's AlibiPositionalBias as the protocol's cached ``AlibiPositionalBias`` (see
``harness.adapters.xtransformers_alibi``): its cache slices ``bias[..., :i, :j]`` (the first queries' rows), the bug 1.22.17 fixed;
``alibi_module.call_sequences`` catches it.
ImportError (the target does not load) without ``pip install --target /tmp/libs/xt-1.22.16 --no-deps x-transformers==1.22.16``."""
from harness.adapters.xtransformers_alibi import alibi_module

__version__ = "1.22.16"
AlibiPositionalBias = alibi_module(__version__)
