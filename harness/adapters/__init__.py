"""Adapters: real libraries exposed under the harness protocol, so the suites hold them to it.

Each adapter is a target module (``--impl harness.adapters.<name>``) that declares the
conventions the library follows in ``HARNESS_CONVENTIONS``. An adapter whose library is
not installed raises ImportError on import; the suites then report the target as not loading.

``hf_attention_interface`` is the exception: not a target but the bridge that registers a
target's attention in transformers' ``AttentionInterface`` so real HF models run on it.
"""
